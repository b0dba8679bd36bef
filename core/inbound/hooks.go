package inbound

import (
	"context"
	"math"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// PanickedKey is the rate-limit key of a request whose Key function
// panicked: such requests share one quota, so a broken key function
// limits more, never less.
const PanickedKey = "inbound: key function panicked"

// PanickedFlow is the flow of a request whose Flow function panicked:
// such requests share one flow, and so one fair share.
const PanickedFlow = "inbound: flow function panicked"

// containHooks wraps the hooks of opts that run for one request (the
// limiter's Priority, the rate limit's Key, the adaptive limiter's
// Classify) so that a panic in one gives that request an ordinary answer
// instead of a dropped connection, whatever the adapter:
//
//   - Priority: the request ranks last (math.MaxInt), so it is served if
//     there is room and shed first if not;
//   - Key: the request counts against PanickedKey;
//   - Flow: the request joins the flow PanickedFlow; FlowWeight: weight 1;
//   - Classify: the request's outcome is ignored by the adaptive limit;
//   - Cost (the limiter's or the rate limit's): the request costs 1.
//
// Each panic is reported as event.HookPanic (Reason the hook's name, Err a
// *resilience.HookPanicError). opts' pointers are copied, never written
// through. A custom Pipeline's hooks are the pipeline's own and follow
// core's rule: reported, then propagated.
func containHooks(opts *Options, name string) {
	tel := func(hook string) resilience.Telemetry { return resilience.NewTelemetry(name, hook, opts.Listener) }
	if c := opts.Concurrency; c != nil {
		cc := *c
		if cc.Priority != nil {
			cc.Priority = containPriority(cc.Priority, tel(event.HookPriority))
		}
		cc.Flow, cc.FlowWeight = containFlow(cc.Flow, cc.FlowWeight, tel)
		cc.Cost = containCost(cc.Cost, tel)
		opts.Concurrency = &cc
	}
	if a := opts.Adaptive; a != nil {
		aa := *a
		if aa.Priority != nil {
			aa.Priority = containPriority(aa.Priority, tel(event.HookPriority))
		}
		aa.Flow, aa.FlowWeight = containFlow(aa.Flow, aa.FlowWeight, tel)
		if aa.Classify != nil {
			aa.Classify = containClassify(aa.Classify, tel(event.HookClassifier))
		}
		opts.Adaptive = &aa
	}
	if r := opts.RateLimit; r != nil && (r.Key != nil || r.Cost != nil) {
		rr := *r
		if rr.Key != nil {
			rr.Key = containKey(rr.Key, tel(event.HookKey))
		}
		rr.Cost = containCost(rr.Cost, tel)
		opts.RateLimit = &rr
	}
}

// containFlow wraps a limiter's Flow and FlowWeight functions (nil stays
// nil).
func containFlow(flow func(context.Context) string, weight func(context.Context) int, tel func(string) resilience.Telemetry) (func(context.Context) string, func(context.Context) int) {
	if flow != nil {
		f, t := flow, tel(event.HookFlow)
		flow = func(ctx context.Context) (key string) {
			defer func() {
				if v := recover(); v != nil {
					t.EmitHookPanic(ctx, event.HookFlow, v)
					key = PanickedFlow
				}
			}()
			return f(ctx)
		}
	}
	if weight != nil {
		w, t := weight, tel(event.HookFlowWeight)
		weight = func(ctx context.Context) (n int) {
			defer func() {
				if v := recover(); v != nil {
					t.EmitHookPanic(ctx, event.HookFlowWeight, v)
					n = 1
				}
			}()
			return w(ctx)
		}
	}
	return flow, weight
}

func containPriority(f func(context.Context) int, tel resilience.Telemetry) func(context.Context) int {
	return func(ctx context.Context) (rank int) {
		defer func() {
			if v := recover(); v != nil {
				tel.EmitHookPanic(ctx, event.HookPriority, v)
				rank = math.MaxInt
			}
		}()
		return f(ctx)
	}
}

func containKey(f func(context.Context) string, tel resilience.Telemetry) func(context.Context) string {
	return func(ctx context.Context) (key string) {
		defer func() {
			if v := recover(); v != nil {
				tel.EmitHookPanic(ctx, event.HookKey, v)
				key = PanickedKey
			}
		}()
		return f(ctx)
	}
}

func containClassify(f resilience.Classifier, tel resilience.Telemetry) resilience.Classifier {
	return func(ctx context.Context, err error) (o resilience.LimitOutcome) {
		defer func() {
			if v := recover(); v != nil {
				tel.EmitHookPanic(ctx, event.HookClassifier, v)
				o = resilience.LimitIgnored
			}
		}()
		return f(ctx, err)
	}
}
