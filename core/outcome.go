package resilience

import (
	"context"
	"errors"
)

// Outcome is the result of one execution or attempt: the callback's value
// and error. Every predicate (ShouldHandle) and generator of the outbound
// strategies receives one, so a strategy can react to a value (an HTTP 503
// response) as well as to an error. It is a plain value, safe to copy and
// to read from several goroutines; the zero Outcome is a success with the
// zero T. It holds no state, so nothing in it changes on failure.
type Outcome[T any] struct {
	Value T
	Err   error
}

// OutcomeOf returns the Outcome of a (T, error) pair.
func OutcomeOf[T any](v T, err error) Outcome[T] { return Outcome[T]{Value: v, Err: err} }

// Failed reports whether the outcome carries an error.
func (o Outcome[T]) Failed() bool { return o.Err != nil }

// Unpack returns the value and the error, the usual Go pair.
func (o Outcome[T]) Unpack() (T, error) { return o.Value, o.Err }

// ExecuteOutcome is Execute for callers who prefer to match on one value:
// it runs fn through the pipeline and returns its value and error (or the
// rejection of a strategy) as an Outcome. A panic in fn propagates as with
// Execute.
func (p *Pipeline[T]) ExecuteOutcome(ctx context.Context, fn func(ctx context.Context) (T, error)) Outcome[T] {
	v, err := p.Execute(ctx, fn)
	return Outcome[T]{Value: v, Err: err}
}

// handlesFailure is the default ShouldHandle of retry, circuit breaker,
// fallback and hedging: any error except a cancellation. A cancelled
// context is the caller giving up, not the dependency failing, so it is
// neither retried nor counted against the dependency.
func handlesFailure[T any](o Outcome[T]) bool {
	return o.Err != nil && !errors.Is(o.Err, context.Canceled)
}
