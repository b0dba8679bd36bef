package resilience

import "context"

// Admit is Acquire for a caller that runs the execution itself and wants
// the events Execute emits: a rejection emits event.RateLimiterRejected
// (with the time queued), a permit after queueing event.QueueAdmitted, on
// tel. The priority is read from ctx, as Execute reads it. After nil, the
// caller must call Release exactly once. The inbound middleware admits its
// requests this way, so that it can release a permit when the handler
// really returns.
func (l *ConcurrencyLimiter) Admit(ctx context.Context, tel Telemetry) error {
	var rank func(context.Context) int
	if p := l.opts.Priority; p != nil {
		rank = func(ctx context.Context) int { return callPriority(ctx, &tel, p) }
	}
	waited, r := l.engine.Acquire(ctx, rank)
	if err := engineError(ctx, r); err != nil {
		emitLimiterRejection(ctx, tel, waited, err)
		return err
	}
	emitQueueAdmitted(ctx, tel, waited)
	return nil
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
