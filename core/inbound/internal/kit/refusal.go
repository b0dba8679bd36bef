package kit

import (
	"context"
	"errors"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Refusal is the answer an error of the inbound pipeline, for a request
// that did not run to its end, asks for: the one classification behind
// inbound's JSON rejections and adapt's RPC statuses.
type Refusal uint8

const (
	// None: nothing to send (no error, or the client left:
	// context.Canceled).
	None Refusal = iota
	// RateLimited: a *resilience.RateLimitRejectedError.
	RateLimited
	// Full, QueueTimeout, Dropped and ShuttingDown: a
	// *resilience.ConcurrencyLimitRejectedError with that reason (Full for
	// any other).
	Full
	QueueTimeout
	Dropped
	ShuttingDown
	// Timeout: resilience.ErrTimeoutRejected, the middleware's or a custom
	// pipeline's timeout.
	Timeout
	// CallerDeadline: context.DeadlineExceeded, the caller's deadline.
	CallerDeadline
	// Rejected: another strategy's rejection (resilience.ErrRejected), or
	// a rate-limit store that failed closed (resilience.ErrRateLimitStore).
	Rejected
	// Internal: any other error, reported without its text.
	Internal
)

// Refuse classifies err; rate is err's *resilience.RateLimitRejectedError
// when the refusal is RateLimited.
func Refuse(err error) (r Refusal, rate *resilience.RateLimitRejectedError) {
	if err == nil {
		return None, nil
	}
	if rate, ok := errors.AsType[*resilience.RateLimitRejectedError](err); ok {
		return RateLimited, rate
	}
	if bulk, ok := errors.AsType[*resilience.ConcurrencyLimitRejectedError](err); ok {
		switch bulk.Reason {
		case resilience.ReasonQueueTimeout:
			return QueueTimeout, nil
		case resilience.ReasonDropped:
			return Dropped, nil
		case resilience.ReasonShuttingDown:
			return ShuttingDown, nil
		}
		return Full, nil
	}
	switch {
	case errors.Is(err, resilience.ErrTimeoutRejected):
		return Timeout, nil
	case errors.Is(err, context.DeadlineExceeded):
		return CallerDeadline, nil
	case errors.Is(err, context.Canceled):
		return None, nil
	case errors.Is(err, resilience.ErrRejected), errors.Is(err, resilience.ErrRateLimitStore):
		return Rejected, nil
	}
	return Internal, nil
}
