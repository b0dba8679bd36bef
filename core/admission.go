package resilience

import (
	"context"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/internal/queue"
)

// ConcurrencyPermit is a permit of a ConcurrencyLimiter (TryAcquire,
// Acquire, Admit), counted to its flow when it came from the queue of a
// limiter with a Flow function. Release it exactly once. It is the fixed
// limiter's AdaptivePermit: the same acquire, try and release, without an
// outcome, since a fixed limit learns nothing from one.
type ConcurrencyPermit struct {
	l *ConcurrencyLimiter
	f *queue.Flow // nil: not counted to a flow
	n int         // permits held, for a costly execution (0 or 1: one)
}

// Release returns the permit, and its flow's count; a permit of a costly
// execution returns all the permits it holds (see Permits). If an
// execution is queued and the limit allows, the permit passes directly to
// the best waiter. Releasing the zero permit, or a permit twice, is a bug
// in the caller and panics when the limiter notices it (no permit held).
func (p ConcurrencyPermit) Release() {
	if p.l == nil {
		panic("resilience: ConcurrencyPermit.Release of a zero permit")
	}
	if p.n > 1 {
		if !p.l.engine.ReleaseN(queue.Held{Flow: p.f, N: p.n}) {
			panic("resilience: ConcurrencyPermit.Release without a held permit")
		}
		return
	}
	if p.f == nil {
		p.l.release()
		return
	}
	if !p.l.engine.ReleaseFlow(p.f) {
		panic("resilience: ConcurrencyPermit.Release without a held permit")
	}
}

// TryAcquire takes a permit if one is free and nobody is waiting, and
// reports whether it did. It never queues and reads no priority or flow
// (a permit free at once is counted to no flow, as under Execute). After
// true, release the permit exactly once. It has the shape of
// AdaptiveLimiter.TryAcquire.
func (l *ConcurrencyLimiter) TryAcquire() (ConcurrencyPermit, bool) {
	if !l.engine.TryAcquire() {
		return ConcurrencyPermit{}, false
	}
	return ConcurrencyPermit{l: l}, true
}

// Acquire takes a permit, queueing for one if the limiter's options allow,
// with the priority and the flow read from ctx as Execute reads them, and
// returns it: release it exactly once (a permit from the queue stays
// counted to its flow until then). Otherwise it returns a
// *ConcurrencyLimitRejectedError (ReasonFull, ReasonQueueTimeout or
// ReasonDropped), or context.Cause(ctx) when ctx ended first; an execution
// whose context has already ended is neither admitted nor queued. A
// queued caller waits at most QueueTimeout and never past ctx's deadline.
// The rejection errors are shared values: match them with errors.As or
// errors.Is and do not modify them. It has the shape of
// AdaptiveLimiter.Acquire; Admit is Acquire with Execute's events.
func (l *ConcurrencyLimiter) Acquire(ctx context.Context) (ConcurrencyPermit, error) {
	if l.fair != nil {
		_, r, f := l.engine.AcquireRanked(ctx, l.fair.rankFunc(nil), true)
		if err := engineError(ctx, r); err != nil {
			return ConcurrencyPermit{}, err
		}
		return ConcurrencyPermit{l: l, f: f}, nil
	}
	_, r := l.engine.Acquire(ctx, l.opts.Priority)
	if err := engineError(ctx, r); err != nil {
		return ConcurrencyPermit{}, err
	}
	return ConcurrencyPermit{l: l}, nil
}

// Admit is Acquire with the events Execute emits, for a pipeline's own
// strategy or a middleware that runs the execution itself: a rejection
// emits event.ConcurrencyLimiterRejected (with the time queued), a permit
// after queueing event.QueueAdmitted, on tel (NewTelemetry, with the
// pipeline's and the strategy's names). The priority, the flow and the
// cost (ConcurrencyLimiterOptions.Cost) are read from ctx, as Execute
// reads them. After nil, the caller must release the
// permit exactly once. The inbound middleware admits its requests this
// way, so that it can release a permit when the handler really returns.
func (l *ConcurrencyLimiter) Admit(ctx context.Context, tel Telemetry) (ConcurrencyPermit, error) {
	if l.opts.Cost != nil {
		return l.AdmitN(ctx, tel, callHook(ctx, &tel, event.HookCost, l.opts.Cost))
	}
	if l.fair != nil {
		waited, r, f := l.engine.AcquireRanked(ctx, l.fair.rankFunc(&tel), true)
		if err := engineError(ctx, r); err != nil {
			emitLimiterRejection(ctx, tel, waited, err)
			return ConcurrencyPermit{}, err
		}
		emitQueueAdmitted(ctx, tel, waited)
		return ConcurrencyPermit{l: l, f: f}, nil
	}
	var rank func(context.Context) int
	if p := l.opts.Priority; p != nil {
		rank = func(ctx context.Context) int { return callPriority(ctx, &tel, p) }
	}
	waited, r := l.engine.Acquire(ctx, rank)
	if err := engineError(ctx, r); err != nil {
		emitLimiterRejection(ctx, tel, waited, err)
		return ConcurrencyPermit{}, err
	}
	emitQueueAdmitted(ctx, tel, waited)
	return ConcurrencyPermit{l: l}, nil
}

// Admit is Acquire with Execute's events, as ConcurrencyLimiter.Admit:
// for a pipeline's own strategy or a middleware that runs the execution
// itself, classifies it and passes the outcome to the permit's Release.
func (a *AdaptiveLimiter) Admit(ctx context.Context, tel Telemetry) (AdaptivePermit, error) {
	p, waited, err := a.begin(ctx, &tel)
	if err != nil {
		emitLimiterRejection(ctx, tel, waited, err)
		return AdaptivePermit{}, err
	}
	emitQueueAdmitted(ctx, tel, waited)
	return p, nil
}

// Requests that cost more than one permit: AcquireN, TryAcquireN and
// AdmitN, and the Cost option behind Execute and Admit. The rate
// limiter's side is RateLimiterOptions.Cost.
//
// The adaptive limiter has no cost: it takes one permit per execution. Its
// limit is learnt from the executions' latency, and a costly execution
// already shows as its latency (it runs longer, and holds its permit
// longer); a cost on top would count it twice and would move the limit's
// unit away from what the algorithm measures. Routes whose executions
// differ that much belong in separate limiters anyway (see
// AdaptiveLimiter's caveats); use a fixed limiter, with a cost, in front of
// the costly ones.

// TryAcquireN takes n permits if they are free and nobody is waiting, and
// reports whether it did; it never queues. n below 1 counts as 1, and n
// above the limit as the limit. After true, release the permit exactly
// once; it returns all n.
func (l *ConcurrencyLimiter) TryAcquireN(n int) (ConcurrencyPermit, bool) {
	got, ok := l.engine.TryAcquireN(n)
	if !ok {
		return ConcurrencyPermit{}, false
	}
	return ConcurrencyPermit{l: l, n: got}, true
}

// AcquireN takes n permits at once, queueing for them if the options
// allow, as Acquire takes one (the same errors, and the same rules for
// the context and the queue timeout). n below 1 counts as 1; n above the
// permit limit takes the whole limit, the limit read when the permits are
// granted, so that the execution runs alone instead of waiting forever.
// After nil, release the permit exactly once; it returns all n, and with
// a Flow function the flow is charged all n while they are held.
//
// The queue is head-of-line: the waiter its order puts first (priority,
// then the fair order between flows, then arrival) is granted as soon as
// its n permits are free, and nobody behind it is granted before it.
// Cheaper executions queued behind a costly one wait too, rather than
// overtake it and starve it; the permits freed meanwhile stay unused until
// it fits. A newcomer of a better priority still goes ahead, as it goes
// ahead of any waiter. This is the discipline of
// golang.org/x/sync/semaphore's Acquire.
func (l *ConcurrencyLimiter) AcquireN(ctx context.Context, n int) (ConcurrencyPermit, error) {
	h, err := l.acquireN(ctx, nil, n)
	if err != nil {
		return ConcurrencyPermit{}, err
	}
	return ConcurrencyPermit{l: l, f: h.Flow, n: h.N}, nil
}

// AdmitN is AcquireN with Admit's events, for a caller that knows the
// execution's cost (the inbound middleware calls its Cost function once,
// for the fast path and the queue alike).
func (l *ConcurrencyLimiter) AdmitN(ctx context.Context, tel Telemetry, n int) (ConcurrencyPermit, error) {
	h, err := l.acquireN(ctx, &tel, n)
	if err != nil {
		return ConcurrencyPermit{}, err
	}
	return ConcurrencyPermit{l: l, f: h.Flow, n: h.N}, nil
}

// Permits returns how many permits p holds: 1, or what a costly
// execution's cost came to (clamped to the limit); 0 for the zero permit.
func (p ConcurrencyPermit) Permits() int {
	if p.l == nil {
		return 0
	}
	return max(p.n, 1)
}
