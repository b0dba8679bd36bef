package inbound

import (
	"context"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// Requests that cost more than one permit or token: the Cost functions of
// Options.Concurrency (resilience.ConcurrencyLimiterOptions.Cost) and of
// Options.RateLimit (resilience.RateLimiterOptions.Cost), each a
// func(ctx) int that reads the request view with RequestFrom, as a
// Priority or Key function does, so that one function works behind every
// adapter. Usually the same function serves both:
//
//	cost := func(ctx context.Context) int {
//		if r, _ := inbound.RequestFrom(ctx); r.Path == "/export" {
//			return 10
//		}
//		return 1
//	}
//
// The middleware calls the limiter's once per request, before the
// free-permit shortcut, so a costly request never takes a single free
// permit; with it, every request builds its view (one allocation, as
// under a rate limit). The rate limit calls its own as it takes the
// request's tokens. A cost below 1 counts as 1; a cost above the permit
// limit (or the rate limit's PermitLimit) takes the whole limit, so the
// request runs alone rather than never. A costly request at the head of
// the queue holds back the cheaper ones behind it until its permits are
// free (head-of-line, never starved; see
// resilience.ConcurrencyLimiter.AcquireN); with a Flow function the
// flow is charged every permit it holds. Stats().InFlight (and
// /debug/limits' inflight) counts permits, so an export running shows
// as its cost, and Stats().Costly counts the requests holding more than
// one. The adaptive limiter takes one permit per request (see
// resilience.AdaptiveLimiter): Options.Adaptive has no cost. In shadow
// (Options.Shadow.Concurrency) a request that finds too few permits free
// runs without any, as a request of cost one does.

// dispatchCost is dispatch's admission under a Cost function: the cost
// read once, then cost permits free at once (as the free-permit
// shortcut, with the view built) or through the queue.
func (m *Middleware) dispatchCost(c *call, x *exchange) error {
	x = m.costOf(c, x)
	if c.ctx.Err() == nil {
		if p, ok := m.gate.tryAcquireN(x.cost); ok {
			return m.runCostly(c.ctx, c, p)
		}
	}
	return m.queueOrShed(c, x, x.cost)
}

// runCostly is runHeld for a request admitted under a Cost function: one
// that holds more than one permit is counted in Stats.Costly while it
// runs.
func (m *Middleware) runCostly(ctx context.Context, c *call, p permit) error {
	if p.fixed.Permits() > 1 {
		m.costly.Add(1)
		defer m.costly.Add(-1)
	}
	return m.runHeld(ctx, c, m.gate, p)
}

// tryAcquireN takes cost permits if they are free and nobody waits: the
// fixed limiter only (Options.Adaptive has no cost).
func (g *gate) tryAcquireN(cost int) (permit, bool) {
	if cost <= 1 {
		return g.tryAcquire()
	}
	p, ok := g.fixed.TryAcquireN(cost)
	return permit{fixed: p}, ok
}

// costOf returns c's exchange (x, or a new one) with the request's cost
// read from the limiter's Cost function.
func (m *Middleware) costOf(c *call, x *exchange) *exchange {
	if x == nil {
		x = m.newExchange(c)
	}
	x.cost = max(m.cost(x.viewCtx()), 1)
	return x
}

// containCost wraps a Cost function so that a panic costs its request 1,
// reported as event.HookPanic (nil stays nil).
func containCost(f func(context.Context) int, tel func(string) resilience.Telemetry) func(context.Context) int {
	if f == nil {
		return nil
	}
	t := tel(event.HookCost)
	return func(ctx context.Context) (n int) {
		defer func() {
			if v := recover(); v != nil {
				t.EmitHookPanic(ctx, event.HookCost, v)
				n = 1
			}
		}()
		return f(ctx)
	}
}
