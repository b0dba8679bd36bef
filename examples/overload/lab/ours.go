package lab

import (
	"context"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"net/http"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// Ours returns the project's own configurations, by mode name:
//
//   - none: no shedding at all (the pass-through baseline);
//   - fixed: the fixed limiter (limit, queue, queue timeout, timeout)
//     without CoDel;
//   - fixed-codel: the same with the CoDel queue discipline, as the README
//     and docs/guide.md recommend;
//   - fixed-droplow: the fixed limiter whose full queue drops its
//     lowest-priority waiter for a better newcomer;
//   - adaptive: the adaptive limiter with its defaults (untuned), with
//     only the timeout;
//   - adaptive-codel: the adaptive limiter with the knobs' queue and CoDel;
//   - fixed-retrylast: the fixed limiter ranking requests marked as
//     retries (by.RetriesLast) below first attempts, so that a
//     full queue sheds them first;
//   - the fair modes and their contrast (see fairContenders).
//
// When the knobs are Prioritized, every limiter ranks queued requests by
// PriorityOf.
func Ours() []Contender {
	return append([]Contender{
		PassThrough,
		{Name: "fixed", New: func(k Knobs) (func(http.Handler) http.Handler, error) {
			return inboundMiddleware(k, inbound.Options{Concurrency: fixedOptions(k, nil, "")})
		}},
		{Name: "fixed-codel", New: func(k Knobs) (func(http.Handler) http.Handler, error) {
			return inboundMiddleware(k, inbound.Options{Concurrency: fixedOptions(k, &resilience.CoDelOptions{}, "")})
		}},
		{Name: "fixed-droplow", New: func(k Knobs) (func(http.Handler) http.Handler, error) {
			return inboundMiddleware(k, inbound.Options{Concurrency: fixedOptions(k, nil, resilience.OverflowDropLowestPriority)})
		}},
		{Name: "adaptive", New: func(k Knobs) (func(http.Handler) http.Handler, error) {
			return inboundMiddleware(k, inbound.Options{Adaptive: &resilience.AdaptiveLimiterOptions{Priority: priority(k)}})
		}},
		{Name: "adaptive-codel", New: func(k Knobs) (func(http.Handler) http.Handler, error) {
			return inboundMiddleware(k, inbound.Options{Adaptive: &resilience.AdaptiveLimiterOptions{
				QueueLimit:   k.Queue,
				QueueTimeout: k.QueueTimeout,
				Priority:     priority(k),
				CoDel:        &resilience.CoDelOptions{},
			}})
		}},
		{Name: "fixed-retrylast", New: func(k Knobs) (func(http.Handler) http.Handler, error) {
			o := fixedOptions(k, nil, resilience.OverflowDropLowestPriority)
			o.Priority = by.RetriesLast(o.Priority)
			return inboundMiddleware(k, inbound.Options{Concurrency: o})
		}},
	}, fairContenders()...)
}

func fixedOptions(k Knobs, codel *resilience.CoDelOptions, overflow resilience.OverflowPolicy) *resilience.ConcurrencyLimiterOptions {
	return &resilience.ConcurrencyLimiterOptions{
		PermitLimit:  k.Limit,
		QueueLimit:   k.Queue,
		QueueTimeout: k.QueueTimeout,
		Priority:     priority(k),
		Overflow:     overflow,
		CoDel:        codel,
	}
}

func inboundMiddleware(k Knobs, opts inbound.Options) (func(http.Handler) http.Handler, error) {
	opts.Name = "lab"
	opts.Timeout = k.Timeout
	m, err := inbound.New(opts)
	if err != nil {
		return nil, err
	}
	return m.Handler, nil
}

// priority is the limiters' Priority function when the scenario sends
// classes: the request view the middleware puts in the context carries
// the header.
func priority(k Knobs) func(ctx context.Context) int {
	if !k.Prioritized {
		return nil
	}
	return headerPriority
}

// headerPriority ranks by X-Priority as a service should: only the lab's
// classes are believed, anything else is LowPriority.
var headerPriority = func() func(context.Context) int {
	f, err := by.Priority(by.PriorityHeader{Name: PriorityHeader, Min: HighPriority, Max: LowPriority, Default: LowPriority})
	if err != nil {
		panic(err) // constants: a programming error
	}
	return f
}()
