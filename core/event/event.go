// Package event holds the telemetry events the resilience strategies emit
// and the Listener that receives them. Import it to watch a pipeline: pass
// a Listener to resilience.WithListener (or inbound.Options.Listener) and
// switch on Event.Name; NewSlogListener logs every event with log/slog.
//
// The names and reasons are stable strings, safe to use as metric labels.
// Every Name's value is "On" followed by the constant's name
// (ConcurrencyLimiterRejected is "OnConcurrencyLimiterRejected").
package event

import (
	"context"
	"log/slog"
	"time"

	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// Name names a telemetry event. The values are stable strings.
type Name string

// Events emitted by the built-in strategies.
const (
	// Timeout: a timeout strategy's deadline fired.
	Timeout Name = "OnTimeout"
	// ConcurrencyLimiterRejected: a concurrency limiter (fixed or
	// adaptive) rejected an execution. Event.Reason says why, a
	// resilience.RejectReason: "full", "queue-timeout", "dropped" or
	// "shutting-down"; Event.Duration is the time it waited in the queue,
	// if it queued.
	ConcurrencyLimiterRejected Name = "OnConcurrencyLimiterRejected"
	// RateLimiterRejected: a rate limiter rejected an execution;
	// Event.Reason is ReasonRateLimited.
	RateLimiterRejected Name = "OnRateLimiterRejected"
	// RateLimiterStoreError: a rate limiter's store failed. Event.Reason
	// is "fail-open" (the execution ran) or "fail-closed" (it was
	// refused); Event.Err is the *resilience.RateLimitStoreError, whose
	// cause (timeout, connection-refused, cluster-down, ...) is
	// ratelimit.ReasonOf(Event.Err).
	RateLimiterStoreError Name = "OnRateLimiterStoreError"
	// QueueAdmitted: an execution that had queued in a concurrency or
	// adaptive limiter got its permit after Event.Duration in the queue.
	// An execution admitted at once emits nothing; one rejected after
	// queueing emits ConcurrencyLimiterRejected instead.
	QueueAdmitted Name = "OnQueueAdmitted"
	// ShadowDecision: an inbound stage in shadow (inbound.Options.Shadow)
	// decided against a request and did not enforce it; Reason is what
	// enforcing would have answered ("rate-limited", "queued", "full",
	// "timeout"), and the request went on.
	ShadowDecision Name = "OnShadowDecision"
	// Reconfigured: inbound.Middleware.Reconfigure was called; Reason is
	// ReasonReconfigureOK (the new options are in force) or
	// ReasonReconfigureFailed (refused, Event.Err says why by field; the
	// old options stay).
	Reconfigured Name = "OnReconfigured"

	// Retry: a retry strategy is about to wait Event.Duration and try
	// again; Event.Attempt is the number of the attempt that failed (0 is
	// the first call) and Event.Err its error.
	Retry Name = "OnRetry"
	// RetryBudgetExceeded: a retry or hedging strategy's budget.Budget
	// denied retry or hedged attempt Event.Attempt, so the execution
	// ends with the last outcome (a retry) or races on with the attempts
	// already launched (a hedge); Event.Err is the last attempt's error,
	// if any.
	RetryBudgetExceeded Name = "OnRetryBudgetExceeded"
	// Throttled: an adaptive throttle rejected an execution locally, as
	// the dependency has lately refused too much of what it was sent;
	// Event.Err is the *throttle.ThrottledError.
	Throttled Name = "OnThrottled"
	// CircuitOpened: a circuit breaker opened for Event.Duration (the
	// break duration); Event.Err is the failure that opened it.
	CircuitOpened Name = "OnCircuitOpened"
	// CircuitClosed: a circuit breaker's probe succeeded and it closed.
	CircuitClosed Name = "OnCircuitClosed"
	// CircuitHalfOpened: a circuit breaker let a probe through.
	CircuitHalfOpened Name = "OnCircuitHalfOpened"
	// Fallback: a fallback answered for a failure (Event.Err).
	Fallback Name = "OnFallback"
	// Hedging: a hedging strategy launched hedged attempt Event.Attempt
	// (1 is the first hedge).
	Hedging Name = "OnHedging"
	// ExecutionAttempt: one attempt made by a retry or hedging strategy
	// finished after Event.Duration. Event.Attempt numbers it (0 is the
	// first), Reason is ReasonHandled when the strategy's predicate
	// treated its outcome as a failure and ReasonUnhandled otherwise, and
	// Event.Err is its error.
	ExecutionAttempt Name = "OnExecutionAttempt"
	// HookPanic: a function supplied by the user panicked (see "User
	// hooks and their panics" in docs/guide.md). Event.Reason names the
	// hook (HookPriority and the other Hook… constants) and Event.Err is
	// the *resilience.HookPanicError.
	HookPanic Name = "OnHookPanic"
)

// Hook names: the Reason of HookPanic and the Hook of
// resilience.HookPanicError.
const (
	// HookLimitAlgorithm is limit.Algorithm.Update, run by the release that
	// closes an adaptive limiter's sampling window.
	HookLimitAlgorithm = "limit.Algorithm.Update"
	// HookRender is inbound.Options.Render.
	HookRender = "Options.Render"
	// HookPriority is a limiter's Priority function.
	HookPriority = "Priority"
	// HookFlow is a limiter's Flow function.
	HookFlow = "Flow"
	// HookFlowWeight is a limiter's FlowWeight function.
	HookFlowWeight = "FlowWeight"
	// HookKey is a rate limiter's Key function.
	HookKey = "Key"
	// HookCost is a limiter's Cost function (concurrency or rate).
	HookCost = "Cost"
	// HookClassifier is an adaptive limiter's Classifier.
	HookClassifier = "Classifier"
)

// Reasons of ExecutionAttempt.
const (
	ReasonHandled   = "handled"
	ReasonUnhandled = "unhandled"
)

// ReasonRateLimited is the Event.Reason of a rate limiter's rejection.
const ReasonRateLimited = "rate-limited"

// Reasons of Reconfigured.
const (
	ReasonReconfigureOK     = "ok"
	ReasonReconfigureFailed = "failed"
)

// Event is one telemetry event. Fields that do not apply to an event are
// zero.
type Event struct {
	Name Name
	// Pipeline and Strategy are the names given with resilience.WithName
	// on the builder and in the strategy's options.
	Pipeline string
	Strategy string
	// Reason is a short stable label (a resilience.RejectReason for
	// a concurrency limiter's rejections).
	Reason string
	// Duration is the timeout for Timeout, the time waited in the queue
	// for QueueAdmitted and for a concurrency limiter's rejection after
	// queueing, or
	// the retry-after for a rate limit; the coming delay for Retry, the
	// break for CircuitOpened and the attempt's own duration for
	// ExecutionAttempt.
	Duration time.Duration
	// Err is the error the strategy returns, if any.
	Err error
	// Attempt numbers the attempt a Retry, Hedging or ExecutionAttempt
	// event is about (0 is the first call).
	Attempt int
}

// Listener receives telemetry events. It is called synchronously on the
// goroutine of the execution the event is about (an evicted waiter reports
// its own eviction), so it must be fast and safe for concurrent use. A nil
// Listener (resilience.WithListener(nil), resilience.NewTelemetry with
// nil) drops every event. OnEvent has no error result; a panic in it
// propagates to the execution that emitted the event.
type Listener interface {
	OnEvent(ctx context.Context, e Event)
}

// ListenerFunc adapts a function to Listener.
type ListenerFunc func(ctx context.Context, e Event)

// OnEvent calls f.
func (f ListenerFunc) OnEvent(ctx context.Context, e Event) { f(ctx, e) }

// NewSlogListener returns a Listener that logs each event to logger as one
// record with the attributes event, pipeline, strategy and, when set,
// reason, duration and error; a RateLimiterStoreError also has cause, the
// store's failure as a ratelimit.StoreReason. Rejections and timeouts log at Warn. A nil
// logger means slog.Default().
func NewSlogListener(logger *slog.Logger) Listener {
	if logger == nil {
		logger = slog.Default()
	}
	return slogListener{logger: logger}
}

type slogListener struct{ logger *slog.Logger }

func (s slogListener) OnEvent(ctx context.Context, e Event) {
	level := slog.LevelInfo
	switch e.Name {
	case HookPanic:
		level = slog.LevelError
	case Timeout, ConcurrencyLimiterRejected, RateLimiterRejected, RateLimiterStoreError,
		CircuitOpened, Fallback, RetryBudgetExceeded, Throttled:
		level = slog.LevelWarn
	case ExecutionAttempt, QueueAdmitted:
		// One record per attempt or queued admission is detail, not news.
		level = slog.LevelDebug
	}
	if !s.logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs,
		slog.String("event", string(e.Name)),
		slog.String("pipeline", e.Pipeline),
		slog.String("strategy", e.Strategy))
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", e.Reason))
	}
	if e.Name == RateLimiterStoreError {
		attrs = append(attrs, slog.String("cause", string(ratelimit.ReasonOf(e.Err))))
	}
	if e.Duration != 0 {
		attrs = append(attrs, slog.Duration("duration", e.Duration))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	switch e.Name {
	case Retry, Hedging, ExecutionAttempt, RetryBudgetExceeded:
		attrs = append(attrs, slog.Int("attempt", e.Attempt))
	}
	s.logger.LogAttrs(ctx, level, "resilience event", attrs...)
}
