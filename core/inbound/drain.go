package inbound

import (
	"context"
	"net/http"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// errShuttingDown is what a draining middleware answers every arrival
// with: 503 BULKHEAD_FULL, reason "shutting-down".
var errShuttingDown = &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonShuttingDown}

// drainPoll is how often Drain looks at the requests in flight.
const drainPoll = 5 * time.Millisecond

// Drain prepares a graceful shutdown; call it before http.Server.Shutdown.
// From that moment every new request and every request waiting in the
// concurrency limiter's queue is answered at once with 503 BULKHEAD_FULL,
// reason "shutting-down" (resilience.ReasonShuttingDown), instead of being
// admitted during the grace period or cut off when it ends. Running
// handlers are not interrupted. Drain returns nil once none is in flight,
// or ctx's error when ctx ends first (the grace period is over).
//
// It closes the limiter of Options.Concurrency or Options.Adaptive
// (Close), so a limiter shared with other code stops admitting there too.
// With a custom Pipeline, new arrivals are refused but the pipeline's own
// limiters are the caller's to close; in flight is then what
// Options.LimiterStats reports, and without a limiter Drain does not wait.
// Draining cannot be undone: build a new Middleware to serve again.
func (m *Middleware) Drain(ctx context.Context) error {
	m.draining.Store(true)
	if m.limiter != nil {
		m.limiter.Close()
	}
	if m.adaptive != nil {
		m.adaptive.Close()
	}
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for m.Stats().InFlight > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// rejectHTTP answers a request that did not reach its handler. When its
// context ended while it waited, nothing was rendered: if the client is
// gone the connection is aborted (net/http would otherwise send an empty
// 200 of its own); if the server ended the context (a BaseContext
// cancelled at shutdown) the client, still there, gets the honest 503
// shutting-down. Everything the request held is returned by then.
func (m *Middleware) rejectHTTP(w http.ResponseWriter, r *http.Request, err error) {
	resp, ok := m.Render(err)
	if !ok {
		if clientGone(w) {
			panic(http.ErrAbortHandler)
		}
		resp, _ = m.Render(errShuttingDown)
	}
	writeResponse(w, resp)
}

// closeWait bounds how long clientGone waits for net/http's close
// notification: net/http cancels the request's context first and
// notifies a moment later (for HTTP/2 from a goroutine of its own), so a
// waiter woken by the cancellation may look before the notice is there.
const closeWait = 20 * time.Millisecond

// clientGone reports whether net/http saw the client leave (its
// connection, or its HTTP/2 stream, closed), as opposed to the request's
// context being ended by the server. It is only called once the context
// has ended, off the hot path; a server's cancellation costs it closeWait.
// A writer that cannot tell counts as gone.
func clientGone(w http.ResponseWriter) bool {
	if d, ok := w.(*detachedWriter); ok {
		w = d.w
	}
	//lint:ignore SA1019 the only way net/http tells a closed connection from a cancelled context
	cn, ok := w.(http.CloseNotifier)
	if !ok {
		return true
	}
	ch := cn.CloseNotify()
	select {
	case <-ch:
		return true
	default:
	}
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}
