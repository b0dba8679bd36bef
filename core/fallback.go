package resilience

import (
	"context"

	"github.com/ylcnfrht/resilience/core/event"
)

// FallbackOptions configures a Fallback. Every value is valid; the zero
// value answers every handled failure with the zero T and a nil error. Its
// functions are called concurrently and must be safe for that.
type FallbackOptions[T any] struct {
	// Name labels the strategy's events. Default "Fallback".
	Name string
	// FallbackAction, when set, produces the substitute from the failed
	// outcome; what it returns is what Execute returns. It runs with the
	// caller's context. The outcome it receives is the one it replaces,
	// and it owns it: a value that must be released (an HTTP response
	// body) is its to release, as nothing else sees that value again.
	// outbound.FallbackOptions does this for HTTP responses.
	FallbackAction func(ctx context.Context, o Outcome[T]) (T, error)
	// FallbackValue is returned with a nil error when FallbackAction is
	// nil (the replaced outcome is then dropped unreleased, so values that
	// need releasing call for a FallbackAction). Its zero value is a valid
	// substitute (an empty list).
	FallbackValue T
	// ShouldHandle says which outcomes are replaced. The default handles
	// any error except a context cancellation, so every rejection by the
	// strategies inside (a concurrency limiter that is full, a timeout, an open
	// circuit) is answered by the fallback.
	ShouldHandle func(o Outcome[T]) bool
	// OnFallback, when set, is called with the failed outcome before the
	// substitute is produced.
	OnFallback func(ctx context.Context, o Outcome[T])
}

// Fallback answers a failure of the rest of the pipeline with a substitute
// value, so a caller degrades (renders a page without its
// recommendations) instead of failing. Outcomes it does not handle pass
// through unchanged. Put it outermost, so it sees the final outcome of the
// strategies inside it.
//
// Safe for concurrent use; a panic in the callback or in FallbackAction
// propagates without being answered. Emits event.Fallback with the
// failure's error. Create it with NewFallback or Builder.AddFallback.
type Fallback[T any] struct {
	opts   FallbackOptions[T]
	name   string
	handle func(Outcome[T]) bool
}

// NewFallback returns a fallback strategy configured by opts. Every
// FallbackOptions is valid, so there is no error to return.
func NewFallback[T any](opts FallbackOptions[T]) *Fallback[T] {
	s := &Fallback[T]{opts: opts, name: opts.Name, handle: opts.ShouldHandle}
	if s.name == "" {
		s.name = "Fallback"
	}
	if s.handle == nil {
		s.handle = handlesFailure[T]
	}
	return s
}

// AddFallback appends a Fallback configured by opts.
func (b *Builder[T]) AddFallback(opts FallbackOptions[T]) *Builder[T] {
	return b.AddResultStrategy(NewFallback(opts))
}

// strategyName is the name used in telemetry (see StrategyName).
func (s *Fallback[T]) strategyName() string { return s.name }

// ExecuteResult implements ResultStrategy.
func (s *Fallback[T]) ExecuteResult(ctx context.Context, tel Telemetry, next ResultNext[T]) (T, error) {
	v, err := next(ctx)
	o := Outcome[T]{Value: v, Err: err}
	if !s.handle(o) {
		return v, err
	}
	tel.Emit(ctx, event.Event{Name: event.Fallback, Err: err})
	if s.opts.OnFallback != nil {
		s.opts.OnFallback(ctx, o)
	}
	if s.opts.FallbackAction != nil {
		return s.opts.FallbackAction(ctx, o)
	}
	return s.opts.FallbackValue, nil
}
