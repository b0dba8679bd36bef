package resilienceredis

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// reasonOf classifies one error of go-redis or the network as the cause
// of a failed take.
func reasonOf(err error) ratelimit.StoreReason {
	var ne net.Error
	var re redis.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrBudgetExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return ratelimit.StoreTimeout
	case errors.Is(err, context.Canceled):
		return ratelimit.StoreCanceled
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, redis.ErrClosed):
		return ratelimit.StoreConnectionRefused
	case redis.IsClusterDownError(err), redis.IsMasterDownError(err):
		return ratelimit.StoreClusterDown
	case redis.IsReadOnlyError(err), redis.IsTryAgainError(err):
		// A replica answering for a former master, or a slot in
		// migration: the topology moved under the client.
		return ratelimit.StoreRedirect
	}
	if _, moved := redis.IsMovedError(err); moved {
		return ratelimit.StoreRedirect
	}
	if _, ask := redis.IsAskError(err); ask {
		return ratelimit.StoreRedirect
	}
	if errors.As(err, &re) {
		// Any other error reply to the script (a Lua error, NOSCRIPT past
		// the reload, OOM): Redis answered and refused the decision.
		return ratelimit.StoreScriptError
	}
	if errors.Is(err, resilience.ErrBrokenCircuit) {
		return ratelimit.StoreCircuitOpen
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return ratelimit.StoreConnectionRefused // a dial or socket failure of another kind
	}
	return ratelimit.StoreOther
}

// isNodeFailure reports whether a take failed because its node did not
// serve it (rather than answered with an error, or its caller left).
func isNodeFailure(r ratelimit.StoreReason) bool {
	switch r {
	case ratelimit.StoreTimeout, ratelimit.StoreConnectionRefused, ratelimit.StoreClusterDown:
		return true
	}
	return false
}

// storeErr is err with its cause, as Take returns it.
func storeErr(reason ratelimit.StoreReason, err error) error {
	return &ratelimit.StoreError{Reason: reason, Err: err}
}
