package main

import "testing"

// serverFramework is the -framework startServer starts.
var serverFramework = "chi"

// runAsFramework runs the route tests (written against chi, the default)
// with -framework name: every framework serves the same routes alike.
func runAsFramework(t *testing.T, name string) {
	old := serverFramework
	serverFramework = name
	defer func() { serverFramework = old }()
	for _, tc := range []struct {
		name string
		test func(*testing.T)
	}{
		{"DiagnosticRoutesAnswerWhileSaturated", TestDiagnosticRoutesAnswerWhileSaturated},
		{"WorkIgnoringContextGets504", TestWorkIgnoringContextGets504},
		{"CooperativeStopsAtDeadline", TestCooperativeStopsAtDeadline},
		{"WorkRoutesRunToCompletion", TestWorkRoutesRunToCompletion},
		{"WorkRoutesRejectBadMS", TestWorkRoutesRejectBadMS},
		{"PriorityHeaderDecidesEviction", TestPriorityHeaderDecidesEviction},
		{"RateLimitByHeader", TestRateLimitByHeader},
		{"RateLimitByClientIP", TestRateLimitByClientIP},
		{"ExportCostsTenPermits", TestExportCostsTenPermits},
	} {
		t.Run(tc.name, tc.test)
	}
}
