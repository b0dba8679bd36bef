package resilience

import (
	"context"

	"github.com/ylcnfrht/resilience/core/event"
)

// Telemetry is what a strategy uses to emit events: it carries the names of
// the pipeline and the strategy and the pipeline's listener. The zero value
// emits nothing.
type Telemetry struct {
	pipeline string
	strategy string
	listener event.Listener
}

// NewTelemetry returns a Telemetry that labels events with the given names
// and sends them to l (nil: events are dropped). Pipelines build one per
// strategy; it is exported for strategies used outside a pipeline and for
// tests.
func NewTelemetry(pipeline, strategy string, l event.Listener) Telemetry {
	return Telemetry{pipeline: pipeline, strategy: strategy, listener: l}
}

// Enabled reports whether events are delivered anywhere; strategies may skip
// building an event when it is false.
func (t Telemetry) Enabled() bool { return t.listener != nil }

// Emit labels e with the pipeline and strategy names and delivers it.
func (t Telemetry) Emit(ctx context.Context, e event.Event) {
	if t.listener == nil {
		return
	}
	e.Pipeline = t.pipeline
	e.Strategy = t.strategy
	t.listener.OnEvent(ctx, e)
}

// reportHookPanic, deferred around a call of a hook that runs for one
// execution alone, emits event.HookPanic for a panic passing through and
// lets it go on to the execution's caller with the same value.
func reportHookPanic(ctx context.Context, tel *Telemetry, hook string) {
	if v := recover(); v != nil {
		tel.EmitHookPanic(ctx, hook, v)
		panic(v)
	}
}

// EmitHookPanic emits event.HookPanic for v, the value a user's hook
// (event.HookPriority, event.HookKey, …) panicked with, its Err a
// *HookPanicError: the one report of a hook's panic, for core's
// strategies, the inbound middleware and a custom strategy alike. What
// happens to the panic next (raised again, or contained) is the caller's.
func (t Telemetry) EmitHookPanic(ctx context.Context, hook string, v any) {
	t.Emit(ctx, event.Event{Name: event.HookPanic, Reason: hook, Err: &HookPanicError{Hook: hook, Value: v}})
}
