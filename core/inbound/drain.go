package inbound

import (
	"context"
	"time"
)

// drainPoll is how often Drain looks at the requests in flight.
const drainPoll = 5 * time.Millisecond

// Drain prepares a graceful shutdown; call it before http.Server.Shutdown.
// From that moment every new request and every request waiting in the
// concurrency limiter's queue is answered at once with 503 BULKHEAD_FULL,
// reason "shutting-down" (resilience.ReasonShuttingDown), instead of being
// admitted during the grace period or cut off when it ends. Every answer
// the middleware renders from then on carries "Connection: close"
// (ClosesConnection), so kept-alive clients reconnect to another
// instance; the answers of handlers still running are the server's
// (http.Server.SetKeepAlivesEnabled(false) at the same moment). Running
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
