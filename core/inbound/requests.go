package inbound

import (
	"errors"
	"sync/atomic"

	resilience "github.com/ylcnfrht/resilience/core"
)

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

// requestCounters are RequestCounts as they are counted: one atomic add
// per request, on the request's goroutine.
type requestCounters struct {
	admitted, timedOut, rateLimited                  atomic.Uint64
	full, queueTimeout, dropped, shuttingDown, other atomic.Uint64
	panics                                           atomic.Uint64
	storeUnavailable                                 atomic.Uint64
}

func (r *requestCounters) load() RequestCounts {
	return RequestCounts{
		Admitted: r.admitted.Load(), TimedOut: r.timedOut.Load(), RateLimited: r.rateLimited.Load(),
		Full: r.full.Load(), QueueTimeout: r.queueTimeout.Load(), Dropped: r.dropped.Load(),
		ShuttingDown: r.shuttingDown.Load(), Canceled: r.other.Load(), Panicked: r.panics.Load(),
		StoreUnavailable: r.storeUnavailable.Load(),
	}
}

// ran counts a request whose handler ran; timedOut says the deadline
// answered it, and counted that the answer counted it already, as it went
// out (timing.pass), so its return counts nothing more.
func (r *requestCounters) ran(timedOut, counted bool) {
	if counted {
		return
	}
	if timedOut {
		r.timedOut.Add(1)
		return
	}
	r.admitted.Add(1)
}

// panicked counts a request whose handler panicked; timedOut says the
// deadline had answered it already (the client got its 504), and counted
// that the answer counted it then.
func (r *requestCounters) panicked(timedOut, counted bool) {
	if counted {
		return
	}
	if timedOut {
		r.timedOut.Add(1)
		return
	}
	r.panics.Add(1)
}

// rejected counts a request refused before its handler ran with err.
func (r *requestCounters) rejected(err error) {
	reason, ok := concurrencyReason(err)
	switch {
	case ok:
		switch reason {
		case resilience.ReasonFull:
			r.full.Add(1)
		case resilience.ReasonQueueTimeout:
			r.queueTimeout.Add(1)
		case resilience.ReasonDropped:
			r.dropped.Add(1)
		case resilience.ReasonShuttingDown:
			r.shuttingDown.Add(1)
		default:
			r.other.Add(1)
		}
	case errors.Is(err, resilience.ErrRateLimitRejected):
		r.rateLimited.Add(1)
	case storeFailedClosed(err):
		r.storeUnavailable.Add(1)
	default:
		r.other.Add(1)
	}
}

// concurrencyReason is the reason of a *resilience.ConcurrencyLimitRejectedError in
// err. The limiters return one as it is: asked first, it costs no
// allocation (errors.As's target escapes).
func concurrencyReason(err error) (resilience.RejectReason, bool) {
	if b, ok := err.(*resilience.ConcurrencyLimitRejectedError); ok {
		return b.Reason, true
	}
	var b *resilience.ConcurrencyLimitRejectedError
	if errors.As(err, &b) {
		return b.Reason, true
	}
	return "", false
}

// fnTimedOut reports whether Execute's callback (c.fn), which returned
// err, was answered by a deadline (runFn returns the timeout then,
// whatever fn returned).
func fnTimedOut(err error) bool { return isTimeout(err) }

// httpTimedOut reports whether a net/http request that ended as res was
// answered by its deadline.
func httpTimedOut(res *result) bool {
	return res.state == stateTimedOut || res.state == stateAborted
}
