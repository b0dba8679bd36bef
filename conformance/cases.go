package conformance

// allCases is the suite, in the order Run runs it: the inbound table
// first, the long randomized and overload runs last.
var allCases = concatCases(
	tableCases,
	priorityCases,
	fairnessCases,
	viewCases,
	rateLimitCases,
	headerCases,
	drainCases,
	timeoutCases,
	http2Cases,
	disconnectCases,
	goneCases,
	panicCases,
	streamingCases,
	renderCases,
	stressCases,
	overloadCases,
	adaptiveCases,
)

func concatCases(groups ...[]Case) []Case {
	var all []Case
	for _, g := range groups {
		all = append(all, g...)
	}
	return all
}
