package inbound

// RequestCounts counts the requests a middleware has seen by how each
// ended; every request counts once, in one field, so the fields add up to
// all requests and any of them divided by that sum is a share (of
// requests shed, rate limited, timed out). The JSON names are stable;
// in Stats they sit beside the limiter's numbers.
//
// A request counts when it is answered: a rejection at once, a handler's
// request when the handler returns, and a request whose deadline passed
// while its handler ran as TimedOut the moment its 504 (or the adapter's
// answer) goes out, while the handler, late (Stats.Late), may run on
// and keep its permit. A callback of Execute, which answers nothing
// itself, counts when it returns.
type RequestCounts struct {
	// Admitted counts requests whose handler ran and answered (any
	// status the handler chose).
	Admitted uint64 `json:"admitted"`
	// TimedOut counts requests whose handler ran past the deadline and
	// were answered 504 (or, for Execute, got the timeout error) instead.
	TimedOut uint64 `json:"timedOut"`
	// RateLimited counts 429s of the rate limit.
	RateLimited uint64 `json:"rateLimited"`
	// StoreUnavailable counts 503s of a rate limit whose store failed
	// closed (resilience.RateLimiterOptions.FailClosed): the store could
	// not decide, which is an outage, not a client over its quota.
	StoreUnavailable uint64 `json:"storeUnavailable"`
	// Full, QueueTimeout, Dropped and ShuttingDown count the concurrency
	// stage's 503s by their reason (resilience.RejectReason).
	Full         uint64 `json:"full"`
	QueueTimeout uint64 `json:"queueTimeout"`
	Dropped      uint64 `json:"dropped"`
	ShuttingDown uint64 `json:"shuttingDown"`
	// Canceled counts requests whose context ended before they were
	// admitted (the client left while queued), and any other refusal
	// before the handler ran.
	Canceled uint64 `json:"canceled"`
	// Panicked counts requests whose handler panicked before the deadline
	// answered them (Options.AnswerPanics says what the client gets).
	Panicked uint64 `json:"panicked"`
}

// sum is the number of requests counted (Stats.Requests).
func (c RequestCounts) sum() uint64 {
	return c.Admitted + c.TimedOut + c.RateLimited + c.StoreUnavailable + c.Full + c.QueueTimeout + c.Dropped + c.ShuttingDown + c.Canceled + c.Panicked
}
