package inbound

import (
	"context"
	"math"
)

// Headers that mark a request as a retry or a hedge: the one the outbound
// transport sends (outbound.AttemptHeader) and gRPC's own.
const (
	retryAttemptHeader = "Retry-Attempt"
	grpcAttemptsHeader = "Grpc-Previous-Rpc-Attempts"
)

// IsRetry reports whether the request of ctx's view is marked as a retry
// or a hedge: a Retry-Attempt header (as outbound.Transport sends it) or a
// grpc-previous-rpc-attempts header (as gRPC and Connect clients send
// it) with a number above 0. False without a view.
func IsRetry(ctx context.Context) bool {
	r, ok := RequestFrom(ctx)
	if !ok || r.Header == nil {
		return false
	}
	return positive(r.Header.Get(retryAttemptHeader)) || positive(r.Header.Get(grpcAttemptsHeader))
}

// positive reports whether s is a decimal number above 0, without
// allocating.
func positive(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	nonZero := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return false
		}
		nonZero = nonZero || c != '0'
	}
	return nonZero
}

// RetryPriority returns a priority function that ranks marked retries and
// hedges (IsRetry) just below first attempts of the same priority, so
// that under overload the queue serves fresh work first and, with
// resilience.OverflowDropLowestPriority, sheds repeated work first. base
// is the priority function it refines; nil means every request has
// priority 0.
//
// Priorities keep their order: base priority p becomes 2p for a first
// attempt and 2p+1 for a retry, so a retry still outranks every request
// of a lower base priority. Use it as ConcurrencyLimiterOptions.Priority
// or AdaptiveLimiterOptions.Priority.
func RetryPriority(base func(ctx context.Context) int) func(ctx context.Context) int {
	return func(ctx context.Context) int {
		p := 0
		if base != nil {
			p = base(ctx)
		}
		// Clamp so that doubling cannot overflow.
		p = min(max(p, math.MinInt/2), math.MaxInt/2-1)
		p *= 2
		if IsRetry(ctx) {
			p++
		}
		return p
	}
}
