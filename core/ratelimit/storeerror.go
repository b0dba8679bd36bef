package ratelimit

import (
	"context"
	"errors"
)

// StoreReason is the cause of a store's failure, one of a small fixed set
// of stable strings, so it can label metrics and alerts (the Redis store's
// "cluster-down" apart from its "timeout") without the unbounded text of
// the error itself.
type StoreReason string

// The causes a Store reports in a *StoreError.
const (
	// StoreTimeout: the store did not answer within its budget.
	StoreTimeout StoreReason = "timeout"
	// StoreConnectionRefused: no connection to the store could be made
	// (refused, reset, no route).
	StoreConnectionRefused StoreReason = "connection-refused"
	// StoreClusterDown: the store is a cluster that does not serve the
	// key's slot now (Redis's CLUSTERDOWN, no master for the slot).
	StoreClusterDown StoreReason = "cluster-down"
	// StoreRedirect: the cluster kept redirecting the key elsewhere
	// (Redis's MOVED or ASK past the client's redirects), as during a
	// resharding or a failover.
	StoreRedirect StoreReason = "redirect"
	// StoreScriptError: the store ran the decision and failed in it
	// (a Lua script error, a reply of the wrong shape).
	StoreScriptError StoreReason = "script-error"
	// StoreCircuitOpen: a circuit breaker in front of the store refused
	// the call without trying it.
	StoreCircuitOpen StoreReason = "circuit-open"
	// StoreNodeDown: the cluster node serving the key stopped answering
	// lately, and the store fails its keys at once until a probe gets
	// through, rather than waiting out the budget for each.
	StoreNodeDown StoreReason = "node-down"
	// StoreCanceled: the caller's context ended during the take.
	StoreCanceled StoreReason = "canceled"
	// StoreOther: any other failure.
	StoreOther StoreReason = "other"
)

// StoreReasons lists every StoreReason, for code that builds one metric
// series or alert per cause.
var StoreReasons = []StoreReason{StoreTimeout, StoreConnectionRefused, StoreClusterDown, StoreRedirect,
	StoreScriptError, StoreCircuitOpen, StoreNodeDown, StoreCanceled, StoreOther}

// StoreError is a store's failure with its cause. A Store returns one so
// that telemetry can tell an outage's causes apart; match it with
// errors.As (it reaches the limiter's caller inside the
// resilience.RateLimitStoreError), or read the cause of any error with
// ReasonOf. It unwraps to the underlying error, so errors.Is still finds
// a store's sentinel (the Redis store's ErrBudgetExceeded).
type StoreError struct {
	// Reason is the cause, one of StoreReasons.
	Reason StoreReason
	// Err is the underlying error.
	Err error
}

func (e *StoreError) Error() string {
	msg := "rate limit store: " + string(e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *StoreError) Unwrap() error { return e.Err }

// ReasonOf returns the cause of a store's failure err: the Reason of the
// first *StoreError in its chain; otherwise StoreTimeout for a
// context.DeadlineExceeded, StoreCanceled for a context.Canceled and
// StoreOther for anything else; "" for nil. For a store of one's own that
// returns plain errors, that is still a bounded label.
func ReasonOf(err error) StoreReason {
	if err == nil {
		return ""
	}
	var se *StoreError
	switch {
	case errors.As(err, &se) && se.Reason != "":
		return se.Reason
	case errors.Is(err, context.DeadlineExceeded):
		return StoreTimeout
	case errors.Is(err, context.Canceled):
		return StoreCanceled
	}
	return StoreOther
}
