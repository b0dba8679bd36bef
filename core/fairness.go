package resilience

import (
	"context"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/internal/queue"
)

// ranker places an execution that must queue in a fair limiter: its
// priority, flow and weight, each from the user's function, with a panic
// reported on tel (nil: not reported) before it goes on to the execution.
type ranker struct {
	priority func(context.Context) int
	flow     func(context.Context) string
	weight   func(context.Context) int
}

func (r *ranker) rank(ctx context.Context, tel *Telemetry) queue.Rank {
	var q queue.Rank
	if r.priority != nil {
		q.Priority = callHook(ctx, tel, event.HookPriority, r.priority)
	}
	q.Flow = callHook(ctx, tel, event.HookFlow, r.flow)
	if r.weight != nil {
		q.Weight = callHook(ctx, tel, event.HookFlowWeight, r.weight)
	}
	return q
}

// callHook runs one of the user's ranking functions for one execution,
// reporting a panic of it on tel (nil: not reported) as hook before it
// goes on to the execution's caller.
func callHook[T any](ctx context.Context, tel *Telemetry, hook string, f func(context.Context) T) T {
	if tel != nil {
		defer reportHookPanic(ctx, tel, hook)
	}
	return f(ctx)
}

// rankFunc returns r.rank for the engine, reporting on tel.
func (r *ranker) rankFunc(tel *Telemetry) func(context.Context) queue.Rank {
	return func(ctx context.Context) queue.Rank { return r.rank(ctx, tel) }
}

// validateFlow reports a FlowWeight without a Flow.
func validateFlow(typeName string, flow func(context.Context) string, weight func(context.Context) int) error {
	if weight != nil && flow == nil {
		return configErrorf(typeName+".FlowWeight", "needs %s.Flow: weights are per flow", typeName)
	}
	return nil
}
