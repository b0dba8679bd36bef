package resilienceotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// ScopeName is the instrumentation scope of the meter.
const ScopeName = "github.com/ylcnfrht/resilience/extensions/otel"

// Instrument names (see the package documentation for units and attributes).
const (
	MetricEvents            = "resilience.events"
	MetricExecutionDuration = "resilience.execution.duration"
	MetricAttemptDuration   = "resilience.attempt.duration"
	MetricQueueWait         = "resilience.queue.wait"
	MetricLimiterLimit      = "resilience.limiter.limit"
	MetricLimiterInFlight   = "resilience.limiter.in_flight"
	MetricLimiterQueued     = "resilience.limiter.queued"
	MetricLimiterLate       = "resilience.limiter.late"
	MetricLimiterMinLimit   = "resilience.limiter.min_limit"
	MetricLimiterMaxLimit   = "resilience.limiter.max_limit"
	MetricLimiterRTT        = "resilience.limiter.rtt"
	MetricLimiterMinRTT     = "resilience.limiter.min_rtt"
	MetricRequests          = "resilience.requests"
	MetricShadowRequests    = "resilience.requests.shadow"
	MetricReloads           = "resilience.reloads"
	MetricCircuitState      = "resilience.circuit.state"
)

// Attribute keys.
const (
	AttrEvent          = attribute.Key("resilience.event.name")
	AttrPipeline       = attribute.Key("resilience.pipeline.name")
	AttrStrategy       = attribute.Key("resilience.strategy.name")
	AttrReason         = attribute.Key("resilience.reason")
	AttrOutcome        = attribute.Key("resilience.outcome")
	AttrAttemptHandled = attribute.Key("resilience.attempt.handled")
	AttrLimiter        = attribute.Key("resilience.limiter.name")
	AttrResult         = attribute.Key("resilience.request.result")
	AttrCircuit        = attribute.Key("resilience.circuit.name")
	AttrCircuitState   = attribute.Key("resilience.circuit.state")
	// AttrStoreReason is the cause of a rate-limit store's failure (a
	// ratelimit.StoreReason: timeout, connection-refused, cluster-down,
	// ...) on the resilience.events of event.RateLimiterStoreError.
	AttrStoreReason = attribute.Key("resilience.store.reason")
	// AttrErrorType is OpenTelemetry's error.type (a semantic
	// convention): on the duration histograms, the outcome of an
	// execution or attempt that did not succeed; absent when it did.
	AttrErrorType = attribute.Key("error.type")
	// AttrReloadResult is "ok" or "failed" on resilience.reloads: a
	// Middleware.Reconfigure that applied, or that was refused.
	AttrReloadResult = attribute.Key("resilience.reload.result")
)

// Values of AttrOutcome: the class of an event's or execution's error.
const (
	OutcomeOK       = "ok"
	OutcomeRejected = "rejected"
	OutcomeTimeout  = "timeout"
	OutcomeCanceled = "canceled"
	OutcomeError    = "error"
)

// QueueAdmitted is the AttrReason of a resilience.queue.wait measurement
// whose wait ended in a permit (event.QueueAdmitted); waits that
// ended in a rejection carry the rejection's reason.
const QueueAdmitted = "admitted"

// ReasonOther replaces an event reason or name this package does not know,
// so a custom strategy cannot make the attribute sets grow without bound.
const ReasonOther = "other"

// knownEvents and knownReasons are the labels core emits; anything else is
// reported as ReasonOther.
var knownEvents = map[event.Name]bool{
	event.Timeout: true, event.ConcurrencyLimiterRejected: true, event.RateLimiterRejected: true,
	event.QueueAdmitted: true, event.RateLimiterStoreError: true,
	event.Retry: true, event.CircuitOpened: true, event.CircuitClosed: true,
	event.CircuitHalfOpened: true, event.Fallback: true,
	event.Hedging: true, event.ExecutionAttempt: true, event.HookPanic: true,
	event.RetryBudgetExceeded: true, event.Throttled: true, event.ShadowDecision: true,
	event.Reconfigured: true,
}

var knownReasons = map[string]bool{
	"": true, string(resilience.ReasonFull): true, string(resilience.ReasonQueueTimeout): true,
	string(resilience.ReasonDropped): true, string(resilience.ReasonShuttingDown): true,
	event.ReasonRateLimited: true, event.ReasonHandled: true, event.ReasonUnhandled: true,
	"fail-open": true, "fail-closed": true, "queued": true, "timeout": true,
	event.HookLimitAlgorithm: true, event.HookRender: true,
	event.HookPriority: true, event.HookKey: true, event.HookClassifier: true,
	event.ReasonReconfigureOK: true, event.ReasonReconfigureFailed: true,
}

// maxNameLen bounds pipeline, strategy and limiter names in attributes.
const maxNameLen = 64

// maxCachedSets bounds the cache of attribute sets; past it sets are built
// per event (the attributes themselves stay bounded by the labels above).
const maxCachedSets = 4096

// Options configures Metrics.
type Options struct {
	// MeterProvider supplies the meter. Nil means the global provider
	// (otel.GetMeterProvider()).
	MeterProvider metric.MeterProvider
	// QueueWaitBuckets are the bucket bounds of resilience.queue.wait, in
	// seconds, ascending. Nil means DefaultQueueWaitBuckets; a service
	// with one queue timeout gets sharper quantiles from
	// QueueWaitBuckets(timeout).
	QueueWaitBuckets []float64
	// DurationBuckets are the bucket bounds of
	// resilience.execution.duration and resilience.attempt.duration, in
	// seconds, ascending. Nil means DefaultDurationBuckets (100 µs to
	// 10 s); DurationBuckets(lowest, highest) builds another range.
	DurationBuckets []float64
}

// Metrics turns resilience telemetry into OpenTelemetry metrics: it is a
// event.Listener (give it to a pipeline with resilience.WithListener
// or to inbound.Options.Listener), a strategy timing executions
// (ExecutionTimer), and the source of the limiter gauges (ObserveLimiter,
// ObserveMiddleware).
//
// Safe for concurrent use. OnEvent allocates nothing once an attribute set
// has been seen. Make it with New; the zero value is not usable. Close
// stops the gauges.
type Metrics struct {
	events   metric.Int64Counter
	reloads  metric.Int64Counter
	exec     metric.Float64Histogram
	attempt  metric.Float64Histogram
	queue    metric.Float64Histogram
	limit    metric.Int64ObservableGauge
	inFlight metric.Int64ObservableUpDownCounter
	queued   metric.Int64ObservableUpDownCounter
	late     metric.Int64ObservableUpDownCounter
	requests metric.Int64ObservableCounter
	shadow   metric.Int64ObservableCounter
	minLimit metric.Int64ObservableGauge
	maxLimit metric.Int64ObservableGauge
	rtt      metric.Float64ObservableGauge
	minRTT   metric.Float64ObservableGauge
	circuit  metric.Int64ObservableGauge
	reg      metric.Registration

	setsMu sync.RWMutex
	sets   map[setKey]*attrOpts

	limMu      sync.Mutex
	limiters   map[string]*observed
	algorithms map[string]*observedAlgorithm
	circuits   map[string]*observedCircuit
}

// attrOpts is one attribute set as ready-made option slices: passing a
// slice with ... to Add or Record allocates nothing, a fresh variadic
// argument does.
type attrOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// New creates the instruments on the provider's meter, or returns the
// provider's error.
func New(opts Options) (*Metrics, error) {
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	qb := opts.QueueWaitBuckets
	if qb == nil {
		qb = DefaultQueueWaitBuckets
	}
	db := opts.DurationBuckets
	if db == nil {
		db = DefaultDurationBuckets
	}
	m := &Metrics{sets: make(map[setKey]*attrOpts), limiters: make(map[string]*observed),
		algorithms: make(map[string]*observedAlgorithm), circuits: make(map[string]*observedCircuit)}
	var errs [15]error
	m.events, errs[0] = meter.Int64Counter(MetricEvents, metric.WithUnit("{event}"),
		metric.WithDescription("Telemetry events emitted by resilience strategies."))
	m.exec, errs[1] = meter.Float64Histogram(MetricExecutionDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of executions through a pipeline, from its timing strategy inwards."),
		metric.WithExplicitBucketBoundaries(db...))
	m.attempt, errs[2] = meter.Float64Histogram(MetricAttemptDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of each attempt made by a retry or hedging strategy."),
		metric.WithExplicitBucketBoundaries(db...))
	m.queue, errs[3] = meter.Float64Histogram(MetricQueueWait, metric.WithUnit("s"),
		metric.WithDescription("Time executions spent queued for a limiter's permit, by how the wait ended."),
		metric.WithExplicitBucketBoundaries(qb...))
	m.limit, errs[4] = meter.Int64ObservableGauge(MetricLimiterLimit, metric.WithUnit("{permit}"),
		metric.WithDescription("Current concurrency limit of a limiter."))
	m.inFlight, errs[5] = meter.Int64ObservableUpDownCounter(MetricLimiterInFlight, metric.WithUnit("{execution}"),
		metric.WithDescription("Executions holding a permit of a limiter, late ones included."))
	m.queued, errs[6] = meter.Int64ObservableUpDownCounter(MetricLimiterQueued, metric.WithUnit("{execution}"),
		metric.WithDescription("Executions waiting for a permit of a limiter."))
	m.late, errs[7] = meter.Int64ObservableUpDownCounter(MetricLimiterLate, metric.WithUnit("{execution}"),
		metric.WithDescription("Handlers still running after their deadline was answered."))
	m.requests, errs[8] = meter.Int64ObservableCounter(MetricRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Requests through an inbound middleware, by how each ended; the results add up to all requests."))
	m.minLimit, errs[9] = meter.Int64ObservableGauge(MetricLimiterMinLimit, metric.WithUnit("{permit}"),
		metric.WithDescription("Configured lowest limit of an adaptive limiter."))
	m.maxLimit, errs[10] = meter.Int64ObservableGauge(MetricLimiterMaxLimit, metric.WithUnit("{permit}"),
		metric.WithDescription("Configured highest limit of an adaptive limiter."))
	m.rtt, errs[11] = meter.Float64ObservableGauge(MetricLimiterRTT, metric.WithUnit("s"),
		metric.WithDescription("Mean round-trip time of an adaptive limiter's last sampling window, queue wait excluded."))
	m.minRTT, errs[12] = meter.Float64ObservableGauge(MetricLimiterMinRTT, metric.WithUnit("s"),
		metric.WithDescription("Shortest round-trip time of an adaptive limiter's last sampling window."))
	m.circuit, errs[13] = meter.Int64ObservableGauge(MetricCircuitState,
		metric.WithDescription("State of a circuit breaker: 1 for the current state, 0 for the others."))
	if err := errors.Join(errs[:14]...); err != nil {
		return nil, err
	}
	var err error
	m.shadow, err = meter.Int64ObservableCounter(MetricShadowRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Decisions an inbound stage in shadow made against a request and did not enforce, by what enforcing would have answered."))
	if err != nil {
		return nil, err
	}
	m.reloads, err = meter.Int64Counter(MetricReloads, metric.WithUnit("{reload}"),
		metric.WithDescription("Live reconfigurations of an inbound middleware (Reconfigure), by whether they applied or were refused."))
	if err != nil {
		return nil, err
	}
	m.reg, errs[14] = meter.RegisterCallback(m.observe, m.limit, m.inFlight, m.queued, m.late,
		m.requests, m.shadow, m.minLimit, m.maxLimit, m.rtt, m.minRTT, m.circuit)
	if errs[14] != nil {
		return nil, errs[14]
	}
	return m, nil
}

// Close unregisters the gauges' callback. Counters and histograms keep
// working.
func (m *Metrics) Close() error { return m.reg.Unregister() }

// setKey identifies the attribute set of one event.
type setKey struct {
	event, pipeline, strategy, reason, outcome string
	cause                                      ratelimit.StoreReason // event.RateLimiterStoreError only
}

// OnEvent implements event.Listener: every event counts once in
// resilience.events; attempts and queue waits (admitted, or rejected after
// queueing) also go to their histograms.
func (m *Metrics) OnEvent(_ context.Context, e event.Event) {
	k := setKey{
		event:    string(e.Name),
		pipeline: clip(e.Pipeline),
		strategy: clip(e.Strategy),
		reason:   e.Reason,
		outcome:  Outcome(e.Err),
	}
	if !knownEvents[e.Name] {
		k.event = ReasonOther
	}
	if !knownReasons[k.reason] {
		k.reason = ReasonOther
	}
	if e.Name == event.RateLimiterStoreError {
		k.cause = storeReason(e.Err)
	}
	ctx := context.Background() // measurements carry no request context
	m.events.Add(ctx, 1, m.set(k).add...)
	switch e.Name {
	case event.ExecutionAttempt:
		// The reason says whether the strategy handled the outcome.
		m.attempt.Record(ctx, e.Duration.Seconds(), m.set(setKey{
			event: "attempt", pipeline: k.pipeline, strategy: k.strategy, reason: k.reason, outcome: k.outcome,
		}).rec...)
	case event.QueueAdmitted:
		m.queue.Record(ctx, e.Duration.Seconds(), m.set(setKey{
			event: "queue", pipeline: k.pipeline, strategy: k.strategy, reason: QueueAdmitted,
		}).rec...)
	case event.Reconfigured:
		m.reloads.Add(ctx, 1, m.set(setKey{event: "reload", pipeline: k.pipeline, reason: k.reason}).add...)
	case event.ConcurrencyLimiterRejected:
		if e.Reason == string(resilience.ReasonQueueTimeout) || e.Reason == string(resilience.ReasonDropped) {
			m.queue.Record(ctx, e.Duration.Seconds(), m.set(setKey{
				event: "queue", pipeline: k.pipeline, strategy: k.strategy, reason: k.reason,
			}).rec...)
		}
	}
}

// set returns the cached attribute options for k, building them once.
func (m *Metrics) set(k setKey) *attrOpts {
	m.setsMu.RLock()
	o, ok := m.sets[k]
	m.setsMu.RUnlock()
	if ok {
		return o
	}
	opt := metric.WithAttributeSet(attrsOf(k))
	o = &attrOpts{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
	m.setsMu.Lock()
	if len(m.sets) < maxCachedSets {
		m.sets[k] = o
	}
	m.setsMu.Unlock()
	return o
}

// attrsOf lays out each kind of set: the pseudo-events "attempt", "queue"
// and "exec" are the histograms' sets.
func attrsOf(k setKey) attribute.Set {
	p, s := AttrPipeline.String(k.pipeline), AttrStrategy.String(k.strategy)
	switch k.event {
	case "attempt":
		kv := []attribute.KeyValue{p, s, AttrAttemptHandled.Bool(k.reason == event.ReasonHandled), AttrOutcome.String(k.outcome)}
		return attribute.NewSet(withErrorType(kv, k.outcome)...)
	case "queue":
		return attribute.NewSet(p, s, AttrReason.String(k.reason))
	case "reload":
		return attribute.NewSet(p, AttrReloadResult.String(k.reason))
	case "exec":
		return attribute.NewSet(withErrorType([]attribute.KeyValue{p, AttrOutcome.String(k.outcome)}, k.outcome)...)
	}
	kv := []attribute.KeyValue{AttrEvent.String(k.event), p, s, AttrOutcome.String(k.outcome)}
	if k.reason != "" {
		kv = append(kv, AttrReason.String(k.reason))
	}
	if k.cause != "" {
		kv = append(kv, AttrStoreReason.String(string(k.cause)))
	}
	return attribute.NewSet(kv...)
}

// knownStoreReasons bounds AttrStoreReason: a store of one's own may
// report a reason core does not define.
var knownStoreReasons = func() map[ratelimit.StoreReason]bool {
	m := make(map[ratelimit.StoreReason]bool, len(ratelimit.StoreReasons))
	for _, r := range ratelimit.StoreReasons {
		m[r] = true
	}
	return m
}()

// storeReason is the AttrStoreReason of a store failure err.
func storeReason(err error) ratelimit.StoreReason {
	r := ratelimit.ReasonOf(err)
	if !knownStoreReasons[r] {
		return ratelimit.StoreOther
	}
	return r
}

// Outcome classifies an error for AttrOutcome: OutcomeOK for nil,
// OutcomeTimeout for a timeout (ours or a context deadline),
// OutcomeRejected for another rejection by a strategy, OutcomeCanceled for
// a cancellation, OutcomeError for anything else.
func Outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, resilience.ErrTimeoutRejected), errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	case errors.Is(err, resilience.ErrRejected):
		return OutcomeRejected
	case errors.Is(err, context.Canceled):
		return OutcomeCanceled
	}
	return OutcomeError
}

// withErrorType adds error.type for an outcome other than ok, as
// OpenTelemetry's conventions have it for operation durations.
func withErrorType(kv []attribute.KeyValue, outcome string) []attribute.KeyValue {
	if outcome == OutcomeOK {
		return kv
	}
	return append(kv, AttrErrorType.String(outcome))
}

func clip(s string) string {
	if len(s) > maxNameLen {
		return s[:maxNameLen]
	}
	return s
}

// ExecutionTimer returns a strategy that records how long the rest of a
// pipeline takes, in resilience.execution.duration, labelled with pipeline
// (the pipeline's name, as given to resilience.WithName) and the outcome.
// Add it first, so it sees queueing and retries too; use one per pipeline.
func (m *Metrics) ExecutionTimer(pipeline string) resilience.Strategy {
	t := &execTimer{m: m}
	for i, o := range outcomes {
		t.opts[i] = m.set(setKey{event: "exec", pipeline: clip(pipeline), outcome: o}).rec
	}
	return t
}

type execTimer struct {
	m    *Metrics
	opts [5][]metric.RecordOption // one attribute set per outcome, built once
}

var outcomes = [5]string{OutcomeOK, OutcomeRejected, OutcomeTimeout, OutcomeCanceled, OutcomeError}

func (t *execTimer) StrategyName() string { return "ExecutionTimer" }

func (t *execTimer) Execute(ctx context.Context, _ resilience.Telemetry, next resilience.Next) error {
	start := time.Now()
	err := next(ctx)
	d := time.Since(start)
	var i int
	switch Outcome(err) {
	case OutcomeRejected:
		i = 1
	case OutcomeTimeout:
		i = 2
	case OutcomeCanceled:
		i = 3
	case OutcomeError:
		i = 4
	}
	t.m.exec.Record(context.Background(), d.Seconds(), t.opts[i]...)
	return err
}
