package resilience

import (
	"context"
	"log/slog"
	"time"
)

// EventName names a telemetry event. The values are stable strings.
type EventName string

// Events emitted by the built-in strategies.
const (
	// EventTimeout: a timeout strategy's deadline fired.
	EventTimeout EventName = "OnTimeout"
	// EventRateLimiterRejected: a rate limiter or a concurrency limiter
	// (bulkhead) rejected an execution. Event.Reason says why: "full",
	// "queue-timeout", "dropped" for a bulkhead, "rate-limited" for a rate
	// limiter.
	EventRateLimiterRejected EventName = "OnRateLimiterRejected"
	// EventQueueAdmitted: an execution that had queued in a concurrency or
	// adaptive limiter got its permit after Event.Duration in the queue.
	// An execution admitted at once emits nothing; one rejected after
	// queueing emits EventRateLimiterRejected instead.
	EventQueueAdmitted EventName = "OnQueueAdmitted"

	// EventRetry: a retry strategy is about to wait Event.Duration and try
	// again; Event.Attempt is the number of the attempt that failed (0 is
	// the first call) and Event.Err its error.
	EventRetry EventName = "OnRetry"
	// EventCircuitOpened: a circuit breaker opened for Event.Duration (the
	// break duration); Event.Err is the failure that opened it.
	EventCircuitOpened EventName = "OnCircuitOpened"
	// EventCircuitClosed: a circuit breaker's probe succeeded and it
	// closed.
	EventCircuitClosed EventName = "OnCircuitClosed"
	// EventCircuitHalfOpened: a circuit breaker let a probe through.
	EventCircuitHalfOpened EventName = "OnCircuitHalfOpened"
	// EventFallback: a fallback answered for a failure (Event.Err).
	EventFallback EventName = "OnFallback"
	// EventHedging: a hedging strategy launched hedged attempt
	// Event.Attempt (1 is the first hedge).
	EventHedging EventName = "OnHedging"
	// EventExecutionAttempt: one attempt made by a retry or hedging
	// strategy finished after Event.Duration. Event.Attempt numbers it (0
	// is the first), Reason is "handled" when the strategy's predicate
	// treated its outcome as a failure and "unhandled" otherwise, and
	// Event.Err is its error.
	EventExecutionAttempt EventName = "ExecutionAttempt"
	// EventHookPanic: a function supplied by the user panicked where its
	// panic would have failed an unrelated execution, and was contained
	// (see HookPanicError). Event.Reason names the hook and Event.Err is
	// the *HookPanicError.
	EventHookPanic EventName = "OnHookPanic"
)

// Reasons of EventExecutionAttempt.
const (
	ReasonHandled   = "handled"
	ReasonUnhandled = "unhandled"
)

// ReasonRateLimited is the Event.Reason of a rate limiter rejection.
const ReasonRateLimited = "rate-limited"

// Event is one telemetry event. Fields that do not apply to an event are
// zero.
type Event struct {
	Name EventName
	// Pipeline and Strategy are the names given with WithName on the
	// builder and in the strategy's options.
	Pipeline string
	Strategy string
	// Reason is a short stable label (a RejectReason for bulkhead rejections).
	Reason string
	// Duration is the timeout for EventTimeout, the time waited in the
	// queue for EventQueueAdmitted and for a bulkhead rejection after
	// queueing, or the retry-after for a rate limit;
	// the coming delay for EventRetry, the break for EventCircuitOpened and
	// the attempt's own duration for EventExecutionAttempt.
	Duration time.Duration
	// Err is the error the strategy returns, if any.
	Err error
	// Attempt numbers the attempt an EventRetry, EventHedging or
	// EventExecutionAttempt is about (0 is the first call).
	Attempt int
}

// Listener receives telemetry events. It is called synchronously on the
// goroutine of the execution the event is about (an evicted waiter reports
// its own eviction), so it must be fast and safe for concurrent use. A nil
// Listener (WithListener(nil), NewTelemetry with nil) drops every event.
// OnEvent has no error result; a panic in it propagates to the execution
// that emitted the event.
type Listener interface {
	OnEvent(ctx context.Context, e Event)
}

// ListenerFunc adapts a function to Listener.
type ListenerFunc func(ctx context.Context, e Event)

// OnEvent calls f.
func (f ListenerFunc) OnEvent(ctx context.Context, e Event) { f(ctx, e) }

// Telemetry is what a strategy uses to emit events: it carries the names of
// the pipeline and the strategy and the pipeline's listener. The zero value
// emits nothing.
type Telemetry struct {
	pipeline string
	strategy string
	listener Listener
}

// NewTelemetry returns a Telemetry that labels events with the given names
// and sends them to l (nil: events are dropped). Pipelines build one per
// strategy; it is exported for strategies used outside a pipeline and for
// tests.
func NewTelemetry(pipeline, strategy string, l Listener) Telemetry {
	return Telemetry{pipeline: pipeline, strategy: strategy, listener: l}
}

// Enabled reports whether events are delivered anywhere; strategies may skip
// building an event when it is false.
func (t Telemetry) Enabled() bool { return t.listener != nil }

// Emit labels e with the pipeline and strategy names and delivers it.
func (t Telemetry) Emit(ctx context.Context, e Event) {
	if t.listener == nil {
		return
	}
	e.Pipeline = t.pipeline
	e.Strategy = t.strategy
	t.listener.OnEvent(ctx, e)
}

// NewSlogListener returns a Listener that logs each event to logger as one
// record with the attributes event, pipeline, strategy and, when set,
// reason, duration and error. Rejections and timeouts log at Warn. A nil
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
	case EventHookPanic:
		level = slog.LevelError
	case EventTimeout, EventRateLimiterRejected, EventRateLimiterStoreError,
		EventCircuitOpened, EventFallback:
		level = slog.LevelWarn
	case EventExecutionAttempt, EventQueueAdmitted:
		// One record per attempt or queued admission is detail, not news.
		level = slog.LevelDebug
	}
	if !s.logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs,
		slog.String("event", string(e.Name)),
		slog.String("pipeline", e.Pipeline),
		slog.String("strategy", e.Strategy))
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", e.Reason))
	}
	if e.Duration != 0 {
		attrs = append(attrs, slog.Duration("duration", e.Duration))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	switch e.Name {
	case EventRetry, EventHedging, EventExecutionAttempt:
		attrs = append(attrs, slog.Int("attempt", e.Attempt))
	}
	s.logger.LogAttrs(ctx, level, "resilience event", attrs...)
}
