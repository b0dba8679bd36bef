package resilienceotel

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/limit"
)

// Values of AttrResult: how a request through an inbound middleware ended
// (inbound.RequestCounts). Every request has exactly one, so their sum is
// the number of requests.
const (
	ResultAdmitted    = "admitted"     // its handler answered
	ResultTimeout     = "timeout"      // its deadline answered (504)
	ResultRateLimited = "rate-limited" // 429
	// ResultStoreUnavailable: 503, the rate limiter's store failed and
	// the limiter fails closed (an outage, not a client over its quota).
	ResultStoreUnavailable = "store-unavailable"
	ResultFull             = "full"          // 503, the queue was full
	ResultQueueTimeout     = "queue-timeout" // 503, it waited out the queue timeout
	ResultDropped          = "dropped"       // 503, evicted from the queue
	ResultShuttingDown     = "shutting-down" // 503, the middleware drains
	ResultCanceled         = "canceled"      // its context ended before it was admitted
	ResultPanicked         = "panicked"      // its handler panicked before its deadline
)

var results = [...]string{ResultAdmitted, ResultTimeout, ResultRateLimited, ResultStoreUnavailable, ResultFull,
	ResultQueueTimeout, ResultDropped, ResultShuttingDown, ResultCanceled, ResultPanicked}

// resultCounts lays out c in the order of results.
func resultCounts(c inbound.RequestCounts) [len(results)]uint64 {
	return [...]uint64{c.Admitted, c.TimedOut, c.RateLimited, c.StoreUnavailable, c.Full,
		c.QueueTimeout, c.Dropped, c.ShuttingDown, c.Canceled, c.Panicked}
}

// Values of AttrResult on resilience.requests.shadow: what a stage in
// shadow would have answered (inbound.ShadowCounts).
var shadowResults = [...]string{ResultRateLimited, "queued", ResultFull, ResultTimeout}

func shadowCounts(c inbound.ShadowCounts) [len(shadowResults)]uint64 {
	return [...]uint64{c.RateLimited, c.Queued, c.Full, c.TimedOut}
}

// observed is one limiter the gauges report.
type observed struct {
	attrs metric.MeasurementOption
	// byResult are the attributes of resilience.requests, one per
	// result; nil unless a middleware.
	byResult []metric.MeasurementOption
	byShadow []metric.MeasurementOption // resilience.requests.shadow's, likewise
	read     func(r *reading)
}

// reading is what one collection reads of a limiter.
type reading struct {
	limit, inFlight, queued, late int64
	hasLate                       bool
	requests                      inbound.RequestCounts
	shadow                        inbound.ShadowCounts
}

// ObserveLimiter reports a limiter's limit, in-flight and queued numbers
// under name (resilience.limiter.name) at each collection, until stop is
// called. stats is typically the Stats method of a ConcurrencyLimiter or
// AdaptiveLimiter; it is called from the collecting goroutine and must be
// safe for that. A second limiter under the same name replaces the first.
func (m *Metrics) ObserveLimiter(name string, stats func() resilience.LimiterStats) (stop func()) {
	return m.observeFunc(name, false, func(r *reading) {
		s := stats()
		r.limit, r.inFlight, r.queued = int64(s.Limit), int64(s.InFlight), int64(s.Queued)
	})
}

// ObserveMiddleware is ObserveLimiter for an inbound middleware, whose
// late handlers (resilience.limiter.late) and requests by result
// (resilience.requests) are reported too.
func (m *Metrics) ObserveMiddleware(name string, mw *inbound.Middleware) (stop func()) {
	return m.observeFunc(name, true, func(r *reading) {
		s := mw.Stats()
		r.limit, r.inFlight, r.queued = int64(s.Limit), int64(s.InFlight), int64(s.Queued)
		r.late, r.hasLate, r.requests, r.shadow = s.Late, true, s.RequestCounts, s.Shadow
	})
}

func (m *Metrics) observeFunc(name string, middleware bool, f func(*reading)) func() {
	name = clip(name)
	lim := AttrLimiter.String(name)
	o := &observed{attrs: metric.WithAttributeSet(attribute.NewSet(lim)), read: f}
	if middleware {
		for _, res := range results {
			o.byResult = append(o.byResult, metric.WithAttributeSet(attribute.NewSet(lim, AttrResult.String(res))))
		}
		for _, res := range shadowResults {
			o.byShadow = append(o.byShadow, metric.WithAttributeSet(attribute.NewSet(lim, AttrResult.String(res))))
		}
	}
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

// ObserveAlgorithm wraps an adaptive limiter's algorithm so that the
// gauges report, under name (resilience.limiter.name, the name given to
// ObserveLimiter or ObserveMiddleware for the same limiter), what it
// decides on: the configured MinLimit and MaxLimit
// (resilience.limiter.min_limit, max_limit), and the mean and shortest
// round-trip time of the last sampling window (resilience.limiter.rtt,
// min_rtt). Pass the result as resilience.AdaptiveLimiterOptions.Algorithm;
// alg is typically limit.NewGradient2's (nil means a Gradient2 with
// default options).
//
// Nothing is reported before the limiter's first window has closed. The
// wrapper records a window's summary once per window, off the requests'
// hot path, and forwards Validate to alg. stop ends the reporting; the
// algorithm keeps working.
func (m *Metrics) ObserveAlgorithm(name string, alg limit.Algorithm) (limit.Algorithm, func(), error) {
	if alg == nil {
		g, err := limit.NewGradient2(limit.Gradient2Options{})
		if err != nil {
			return nil, nil, err
		}
		alg = g
	}
	name = clip(name)
	a := &observedAlgorithm{alg: alg, attrs: metric.WithAttributeSet(attribute.NewSet(AttrLimiter.String(name)))}
	m.limMu.Lock()
	m.algorithms[name] = a
	m.limMu.Unlock()
	return a, func() {
		m.limMu.Lock()
		if m.algorithms[name] == a {
			delete(m.algorithms, name)
		}
		m.limMu.Unlock()
	}, nil
}

// observedAlgorithm is a limit.Algorithm that keeps the last window's
// summary for the gauges.
type observedAlgorithm struct {
	alg   limit.Algorithm
	attrs metric.MeasurementOption

	mu   sync.Mutex
	last limit.Sample
	seen bool
}

// Update records s and returns what the wrapped algorithm decides.
func (a *observedAlgorithm) Update(s limit.Sample) float64 {
	a.mu.Lock()
	if s.RTT == 0 && a.seen {
		// A window of drops alone has no round-trip time: the gauges
		// keep the last one measured rather than fall to 0.
		s.RTT, s.MinRTT = a.last.RTT, a.last.MinRTT
	}
	a.last, a.seen = s, true
	a.mu.Unlock()
	return a.alg.Update(s)
}

// Validate forwards the wrapped algorithm's own check.
func (a *observedAlgorithm) Validate() error {
	if v, ok := a.alg.(resilience.Validator); ok {
		return v.Validate()
	}
	return nil
}

func (a *observedAlgorithm) sample() (limit.Sample, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last, a.seen
}

// ObserveCircuit reports a circuit breaker's state under name
// (resilience.circuit.name) at each collection, until stop is called:
// resilience.circuit.state is 1 for the current state and 0 for the
// others. state is typically the breaker's State method.
func (m *Metrics) ObserveCircuit(name string, state func() resilience.CircuitState) (stop func()) {
	name = clip(name)
	c := &observedCircuit{state: state}
	for i, s := range circuitStates {
		c.attrs[i] = metric.WithAttributeSet(attribute.NewSet(AttrCircuit.String(name), AttrCircuitState.String(s.String())))
	}
	m.limMu.Lock()
	m.circuits[name] = c
	m.limMu.Unlock()
	return func() {
		m.limMu.Lock()
		if m.circuits[name] == c {
			delete(m.circuits, name)
		}
		m.limMu.Unlock()
	}
}

var circuitStates = [...]resilience.CircuitState{resilience.CircuitClosed, resilience.CircuitOpen, resilience.CircuitHalfOpen, resilience.CircuitIsolated}

type observedCircuit struct {
	state func() resilience.CircuitState
	attrs [len(circuitStates)]metric.MeasurementOption
}

// observe is the gauges' callback.
func (m *Metrics) observe(_ context.Context, obs metric.Observer) error {
	m.limMu.Lock()
	lims := make([]*observed, 0, len(m.limiters))
	for _, o := range m.limiters {
		lims = append(lims, o)
	}
	algs := make([]*observedAlgorithm, 0, len(m.algorithms))
	for _, a := range m.algorithms {
		algs = append(algs, a)
	}
	circs := make([]*observedCircuit, 0, len(m.circuits))
	for _, c := range m.circuits {
		circs = append(circs, c)
	}
	m.limMu.Unlock()
	for _, o := range lims {
		var r reading
		o.read(&r)
		obs.ObserveInt64(m.limit, r.limit, o.attrs)
		obs.ObserveInt64(m.inFlight, r.inFlight, o.attrs)
		obs.ObserveInt64(m.queued, r.queued, o.attrs)
		if r.hasLate {
			obs.ObserveInt64(m.late, r.late, o.attrs)
		}
		if o.byResult != nil {
			for i, n := range resultCounts(r.requests) {
				obs.ObserveInt64(m.requests, int64(n), o.byResult[i])
			}
		}
		// Shadow series only once a stage in shadow decided something:
		// a middleware that enforces everything adds none.
		if o.byShadow != nil && r.shadow != (inbound.ShadowCounts{Over: r.shadow.Over}) {
			for i, n := range shadowCounts(r.shadow) {
				obs.ObserveInt64(m.shadow, int64(n), o.byShadow[i])
			}
		}
	}
	for _, a := range algs {
		s, ok := a.sample()
		if !ok {
			continue
		}
		obs.ObserveInt64(m.minLimit, int64(s.MinLimit), a.attrs)
		obs.ObserveInt64(m.maxLimit, int64(s.MaxLimit), a.attrs)
		obs.ObserveFloat64(m.rtt, s.RTT.Seconds(), a.attrs)
		obs.ObserveFloat64(m.minRTT, s.MinRTT.Seconds(), a.attrs)
	}
	for _, c := range circs {
		cur := c.state()
		for i, s := range circuitStates {
			v := int64(0)
			if s == cur {
				v = 1
			}
			obs.ObserveInt64(m.circuit, v, c.attrs[i])
		}
	}
	return nil
}
