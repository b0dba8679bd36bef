package resilience

import (
	"context"

	"github.com/ylcnfrht/resilience/core/internal/queue"
)

// ConcurrencyPermit is a permit ConcurrencyLimiter.Admit took, counted to
// its flow when the limiter has a Flow function. Release it exactly once.
type ConcurrencyPermit struct {
	l *ConcurrencyLimiter
	f *queue.Flow // nil: not counted to a flow
}

// Release returns the permit, as ConcurrencyLimiter.Release does (and
// panics as it does when no permit is held).
func (p ConcurrencyPermit) Release() {
	if p.f == nil {
		p.l.Release()
		return
	}
	if !p.l.engine.ReleaseFlow(p.f) {
		panic("resilience: ConcurrencyPermit.Release without a held permit")
	}
}

// Admit is Acquire for a caller that runs the execution itself and wants
// the events Execute emits: a rejection emits
// event.ConcurrencyLimiterRejected (with the time queued), a permit after
// queueing event.QueueAdmitted, on tel. The priority and the flow are read
// from ctx, as Execute reads them. After nil, the caller must release the
// permit exactly once. The inbound middleware admits its requests this
// way, so that it can release a permit when the handler really returns.
func (l *ConcurrencyLimiter) Admit(ctx context.Context, tel Telemetry) (ConcurrencyPermit, error) {
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
// for a caller that runs the execution itself, classifies it and passes
// the outcome to the permit's Release.
func (a *AdaptiveLimiter) Admit(ctx context.Context, tel Telemetry) (AdaptivePermit, error) {
	p, waited, err := a.begin(ctx, &tel)
	if err != nil {
		emitLimiterRejection(ctx, tel, waited, err)
		return AdaptivePermit{}, err
	}
	emitQueueAdmitted(ctx, tel, waited)
	return p, nil
}
