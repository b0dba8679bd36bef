package resilience

import (
	"context"
	"errors"
)

// Outcome is the result of one execution or attempt: the callback's value
// and error. Every predicate (ShouldHandle) and generator of the outbound
// strategies receives one, so a strategy can react to a value (an HTTP 503
// response) as well as to an error.
type Outcome[T any] struct {
	Value T
	Err   error
}

// handlesFailure is the default ShouldHandle of retry, circuit breaker,
// fallback and hedging: any error except a cancellation. A cancelled
// context is the caller giving up, not the dependency failing, so it is
// neither retried nor counted against the dependency.
func handlesFailure[T any](o Outcome[T]) bool {
	return o.Err != nil && !errors.Is(o.Err, context.Canceled)
}
