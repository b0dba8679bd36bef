package retryafter

import (
	"context"
	"errors"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Hint is implemented by errors that carry a server's request to wait
// before trying again (an HTTP Retry-After, a gRPC
// grpc-retry-pushback-ms). Of reads it. Errors are shared between
// goroutines, so RetryAfterHint must only read and be safe for concurrent
// use. It has no failure result: a hint of 0 or less means no wait, and
// an error that does not implement it gives no hint.
type Hint interface {
	RetryAfterHint() time.Duration
}

// Of returns the wait requested by err or any error it wraps: a Hint, or
// the RetryAfter of a *resilience.RateLimitRejectedError.
func Of(err error) (time.Duration, bool) {
	if err == nil {
		return 0, false
	}
	var h Hint
	if errors.As(err, &h) {
		return h.RetryAfterHint(), true
	}
	var rl *resilience.RateLimitRejectedError
	if errors.As(err, &rl) {
		return rl.RetryAfter, true
	}
	return 0, false
}

// Delay is a resilience.RetryOptions.DelayGenerator that waits what the
// failed attempt's error asks for (Of), and otherwise the backoff's delay.
func Delay[T any](_ context.Context, a resilience.RetryArgs[T]) (time.Duration, bool) {
	return Of(a.Outcome.Err)
}
