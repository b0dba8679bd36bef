package resilience

import (
	"errors"
	"fmt"
	"time"

	"github.com/ylcnfrht/resilience/core/internal/config"
)

// Sentinels to match with errors.Is. Every rejection error type below
// reports true for its sentinel and for ErrRejected, so a caller can ask
// "was this shed by a strategy?" without knowing which one.
var (
	// ErrRejected matches any rejection made by a strategy (concurrency
	// limiter, rate limiter, timeout, circuit breaker) as opposed to an
	// error returned by the callback.
	ErrRejected = errors.New("resilience: execution rejected")
	// ErrConcurrencyLimitRejected matches *ConcurrencyLimitRejectedError.
	ErrConcurrencyLimitRejected = errors.New("resilience: concurrency limit rejected")
	// ErrTimeoutRejected matches *TimeoutRejectedError.
	ErrTimeoutRejected = errors.New("resilience: timeout rejected")
	// ErrRateLimitRejected matches *RateLimitRejectedError.
	ErrRateLimitRejected = errors.New("resilience: rate limit rejected")
	// ErrInvalidOptions matches *ConfigError.
	ErrInvalidOptions = config.ErrInvalid
)

// RejectReason says why a concurrency limiter (fixed or adaptive) rejected
// an execution. The values are stable strings: they appear in response bodies,
// logs and metrics.
type RejectReason string

const (
	// ReasonFull: every permit was in use and the queue was full (or there was
	// no queue), so the execution was rejected at once.
	ReasonFull RejectReason = "full"
	// ReasonQueueTimeout: the execution waited QueueTimeout without a permit.
	ReasonQueueTimeout RejectReason = "queue-timeout"
	// ReasonDropped: the execution was queued and later evicted by the
	// overflow policy to make room for another.
	ReasonDropped RejectReason = "dropped"
	// ReasonShuttingDown: the limiter was closed for shutdown (Close)
	// while the execution was queued or before it arrived. The inbound
	// middleware also answers with it a request whose context the server
	// ended before it was served.
	ReasonShuttingDown RejectReason = "shutting-down"
)

// ConcurrencyLimitRejectedError is returned when a concurrency limiter
// (fixed or adaptive) rejects an execution. The callback did not run.
// Match with errors.As, or with errors.Is against
// ErrConcurrencyLimitRejected or ErrRejected. The limiters return one
// shared value per reason: do not modify it.
type ConcurrencyLimitRejectedError struct {
	Reason RejectReason
}

func (e *ConcurrencyLimitRejectedError) Error() string {
	return "resilience: concurrency limit rejected the execution (" + string(e.Reason) + ")"
}

// Is reports whether target is ErrConcurrencyLimitRejected or ErrRejected.
func (e *ConcurrencyLimitRejectedError) Is(target error) bool {
	return target == ErrConcurrencyLimitRejected || target == ErrRejected
}

// TimeoutRejectedError is returned by the timeout strategy when its own
// deadline fired before the callback finished. It is also the cause
// (context.Cause) of the context the callback ran with, so code below the
// strategy can tell a timeout from its caller's cancellation. One value
// may be shared by many executions: do not modify it.
type TimeoutRejectedError struct {
	// Timeout is the duration the strategy allowed.
	Timeout time.Duration
}

func (e *TimeoutRejectedError) Error() string {
	return "resilience: execution timed out after " + e.Timeout.String()
}

// Is reports whether target is ErrTimeoutRejected or ErrRejected.
func (e *TimeoutRejectedError) Is(target error) bool {
	return target == ErrTimeoutRejected || target == ErrRejected
}

// RateLimitRejectedError is returned when a rate limiter refuses an
// execution. The callback did not run.
type RateLimitRejectedError struct {
	// RetryAfter is how long until a permit is likely to be available.
	RetryAfter time.Duration
	// Limit is the number of permits per window for the key.
	Limit int
	// Remaining is the number of permits left in the window (0 here).
	Remaining int
	// Reset is the time until the window (or bucket) is full again.
	Reset time.Duration
}

func (e *RateLimitRejectedError) Error() string {
	return "resilience: rate limit exceeded, retry after " + e.RetryAfter.String()
}

// Is reports whether target is ErrRateLimitRejected or ErrRejected.
func (e *RateLimitRejectedError) Is(target error) bool {
	return target == ErrRateLimitRejected || target == ErrRejected
}

// HookPanicError reports a panic in a function supplied by the user (see
// "User hooks and their panics" in docs/guide.md). It is the Err of an
// event.HookPanic; Hook names the hook (event.HookPriority and the other
// event.Hook… constants). Value is what the hook panicked with. A hook
// shared by every execution (the limit.Algorithm, inbound's Render) is contained
// where it ran; a hook run for one execution alone (Priority, Key,
// Classifier) panics on in that execution, with Value unchanged. Never
// sent to clients; safe to read from any goroutine once returned.
type HookPanicError struct {
	Hook  string
	Value any
}

func (e *HookPanicError) Error() string {
	return fmt.Sprintf("resilience: %s panicked: %v", e.Hook, e.Value)
}

// ConfigError reports an invalid option. It is a struct of two strings:
// Field names the option as Type.Field, as you write it
// ("ConcurrencyLimiterOptions.PermitLimit"; "Gradient2Options.Smoothing"
// from package limit, "Policy.Limit" from package ratelimit), and Problem
// says what is wrong with it. Constructors, builders and Parse functions
// here and in packages limit, ratelimit, inbound and outbound return it and
// build nothing; nothing in this module panics on bad configuration. It
// matches ErrInvalidOptions with errors.Is.
type ConfigError = config.Error

// Validation helpers shared by option structs, from internal/config (the
// leaf packages use the same). Each returns nil or a *ConfigError naming
// field.

func configErrorf(field, format string, args ...any) error {
	return config.Errorf(field, format, args...)
}

func checkPositiveInt(field string, v int) error    { return config.PositiveInt(field, v) }
func checkNonNegativeInt(field string, v int) error { return config.NonNegativeInt(field, v) }
func checkPositiveDuration(field string, d time.Duration) error {
	return config.PositiveDuration(field, d)
}
func checkNonNegativeDuration(field string, d time.Duration) error {
	return config.NonNegativeDuration(field, d)
}

// maxDuration bounds durations so that adding one to time.Now never
// overflows (100 years).
const maxDuration = config.MaxDuration

// ErrBrokenCircuit matches *BrokenCircuitError: a circuit breaker refused
// the execution.
var ErrBrokenCircuit = errors.New("resilience: circuit is broken")

// BrokenCircuitError is returned by a circuit breaker that is open,
// half-open with its probe already running, or isolated. The callback did
// not run. Match with errors.As, or errors.Is against ErrBrokenCircuit or
// ErrRejected.
type BrokenCircuitError struct {
	// RetryAfter is the time until the circuit lets a probe through; 0 when
	// a probe is running now or the circuit is isolated.
	RetryAfter time.Duration
	// Isolated reports a circuit held open by CircuitBreaker.Isolate until
	// CircuitBreaker.Close.
	Isolated bool
}

func (e *BrokenCircuitError) Error() string {
	if e.Isolated {
		return "resilience: circuit is isolated"
	}
	return "resilience: circuit is open, retry after " + e.RetryAfter.String()
}

// Is reports whether target is ErrBrokenCircuit or ErrRejected.
func (e *BrokenCircuitError) Is(target error) bool {
	return target == ErrBrokenCircuit || target == ErrRejected
}

// parseEnum and unknownEnum are the one parsing rule of every Parse
// function and its error (see internal/config).
func parseEnum[E ~string](s string, def E, values ...E) (E, bool) {
	return config.ParseEnum(s, def, values...)
}

func unknownEnum[E ~string](field, what, s string, values ...E) error {
	return config.UnknownEnum(field, what, s, values...)
}
