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
	"github.com/ylcnfrht/resilience/core/inbound"
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

// durationBuckets are OpenTelemetry's recommended HTTP duration buckets,
// in seconds.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// knownEvents and knownReasons are the labels core emits; anything else is
// reported as ReasonOther.
var knownEvents = map[event.Name]bool{
	event.Timeout: true, event.ConcurrencyLimiterRejected: true, event.RateLimiterRejected: true,
	event.QueueAdmitted: true, event.RateLimiterStoreError: true,
	event.Retry: true, event.CircuitOpened: true, event.CircuitClosed: true,
	event.CircuitHalfOpened: true, event.Fallback: true,
	event.Hedging: true, event.ExecutionAttempt: true, event.HookPanic: true,
	event.RetryBudgetExceeded: true, event.Throttled: true,
}

var knownReasons = map[string]bool{
	"": true, string(resilience.ReasonFull): true, string(resilience.ReasonQueueTimeout): true,
	string(resilience.ReasonDropped): true, string(resilience.ReasonShuttingDown): true,
	event.ReasonRateLimited: true, event.ReasonHandled: true, event.ReasonUnhandled: true,
	"fail-open": true, "fail-closed": true,
	event.HookLimitAlgorithm: true, event.HookRender: true,
	event.HookPriority: true, event.HookKey: true, event.HookClassifier: true,
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
	exec     metric.Float64Histogram
	attempt  metric.Float64Histogram
	queue    metric.Float64Histogram
	limit    metric.Int64ObservableGauge
	inFlight metric.Int64ObservableUpDownCounter
	queued   metric.Int64ObservableUpDownCounter
	late     metric.Int64ObservableUpDownCounter
	reg      metric.Registration

	setsMu sync.RWMutex
	sets   map[setKey]*attrOpts

	limMu    sync.Mutex
	limiters map[string]*observed
}

// attrOpts is one attribute set as ready-made option slices: passing a
// slice with ... to Add or Record allocates nothing, a fresh variadic
// argument does.
type attrOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// observed is one limiter the gauges report.
type observed struct {
	attrs metric.MeasurementOption
	stats func() (limit, inFlight, queued, late int64, hasLate bool)
}

// New creates the instruments on the provider's meter, or returns the
// provider's error.
func New(opts Options) (*Metrics, error) {
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{sets: make(map[setKey]*attrOpts), limiters: make(map[string]*observed)}
	var errs [9]error
	m.events, errs[0] = meter.Int64Counter(MetricEvents, metric.WithUnit("{event}"),
		metric.WithDescription("Telemetry events emitted by resilience strategies."))
	m.exec, errs[1] = meter.Float64Histogram(MetricExecutionDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of executions through a pipeline, from its timing strategy inwards."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.attempt, errs[2] = meter.Float64Histogram(MetricAttemptDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of each attempt made by a retry or hedging strategy."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.queue, errs[3] = meter.Float64Histogram(MetricQueueWait, metric.WithUnit("s"),
		metric.WithDescription("Time executions spent queued for a limiter's permit, by how the wait ended."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.limit, errs[4] = meter.Int64ObservableGauge(MetricLimiterLimit, metric.WithUnit("{permit}"),
		metric.WithDescription("Current concurrency limit of a limiter."))
	m.inFlight, errs[5] = meter.Int64ObservableUpDownCounter(MetricLimiterInFlight, metric.WithUnit("{execution}"),
		metric.WithDescription("Executions holding a permit of a limiter, late ones included."))
	m.queued, errs[6] = meter.Int64ObservableUpDownCounter(MetricLimiterQueued, metric.WithUnit("{execution}"),
		metric.WithDescription("Executions waiting for a permit of a limiter."))
	m.late, errs[7] = meter.Int64ObservableUpDownCounter(MetricLimiterLate, metric.WithUnit("{execution}"),
		metric.WithDescription("Handlers still running after their deadline was answered."))
	if err := errors.Join(errs[:8]...); err != nil {
		return nil, err
	}
	m.reg, errs[8] = meter.RegisterCallback(m.observe, m.limit, m.inFlight, m.queued, m.late)
	if errs[8] != nil {
		return nil, errs[8]
	}
	return m, nil
}

// Close unregisters the gauges' callback. Counters and histograms keep
// working.
func (m *Metrics) Close() error { return m.reg.Unregister() }

// setKey identifies the attribute set of one event.
type setKey struct {
	event, pipeline, strategy, reason, outcome string
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
		return attribute.NewSet(p, s, AttrAttemptHandled.Bool(k.reason == event.ReasonHandled), AttrOutcome.String(k.outcome))
	case "queue":
		return attribute.NewSet(p, s, AttrReason.String(k.reason))
	case "exec":
		return attribute.NewSet(p, AttrOutcome.String(k.outcome))
	}
	kv := []attribute.KeyValue{AttrEvent.String(k.event), p, s, AttrOutcome.String(k.outcome)}
	if k.reason != "" {
		kv = append(kv, AttrReason.String(k.reason))
	}
	return attribute.NewSet(kv...)
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

// ObserveLimiter reports a limiter's limit, in-flight and queued numbers
// under name (resilience.limiter.name) at each collection, until stop is
// called. stats is typically the Stats method of a ConcurrencyLimiter or
// AdaptiveLimiter; it is called from the collecting goroutine and must be
// safe for that. A second limiter under the same name replaces the first.
func (m *Metrics) ObserveLimiter(name string, stats func() resilience.LimiterStats) (stop func()) {
	return m.observeFunc(name, func() (int64, int64, int64, int64, bool) {
		s := stats()
		return int64(s.Limit), int64(s.InFlight), int64(s.Queued), 0, false
	})
}

// ObserveMiddleware is ObserveLimiter for an inbound middleware, whose
// late handlers (resilience.limiter.late) are reported too.
func (m *Metrics) ObserveMiddleware(name string, mw *inbound.Middleware) (stop func()) {
	return m.observeFunc(name, func() (int64, int64, int64, int64, bool) {
		s := mw.Stats()
		return int64(s.Limit), int64(s.InFlight), int64(s.Queued), s.Late, true
	})
}

func (m *Metrics) observeFunc(name string, f func() (int64, int64, int64, int64, bool)) func() {
	name = clip(name)
	o := &observed{attrs: metric.WithAttributeSet(attribute.NewSet(AttrLimiter.String(name))), stats: f}
	m.limMu.Lock()
	m.limiters[name] = o
	m.limMu.Unlock()
	return func() {
		m.limMu.Lock()
		if m.limiters[name] == o {
			delete(m.limiters, name)
		}
		m.limMu.Unlock()
	}
}

// observe is the gauges' callback.
func (m *Metrics) observe(_ context.Context, obs metric.Observer) error {
	m.limMu.Lock()
	list := make([]*observed, 0, len(m.limiters))
	for _, o := range m.limiters {
		list = append(list, o)
	}
	m.limMu.Unlock()
	for _, o := range list {
		limit, inFlight, queued, late, hasLate := o.stats()
		obs.ObserveInt64(m.limit, limit, o.attrs)
		obs.ObserveInt64(m.inFlight, inFlight, o.attrs)
		obs.ObserveInt64(m.queued, queued, o.attrs)
		if hasLate {
			obs.ObserveInt64(m.late, late, o.attrs)
		}
	}
	return nil
}
