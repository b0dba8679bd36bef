package resilienceotel

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/limit"
)

// sumByAttrs returns a monotonic int64 counter's points: attributes → value.
func sumByAttrs(t *testing.T, ms map[string]metricdata.Metrics, name string) map[string]int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return nil
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok || !sum.IsMonotonic || sum.Temporality != metricdata.CumulativeTemporality {
		t.Fatalf("%s is %T, want a cumulative monotonic Sum[int64]", name, m.Data)
	}
	out := map[string]int64{}
	for _, dp := range sum.DataPoints {
		out[attrs(dp.Attributes)] = dp.Value
	}
	return out
}

// TestRequestsByResultAndTheClientsOutcome protects the two numbers an
// operator divides by and alerts on: resilience.requests counts every
// request once under its result, so the results add up to the requests
// sent; and a request answered 504 at the deadline is a timeout in
// resilience.execution.duration too, never ok, though its handler (which
// ignores its context) returns normally, late.
func TestRequestsByResultAndTheClientsOutcome(t *testing.T) {
	h := newHarness(t)
	limiter, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{Name: "bulkhead", PermitLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	pipeline, err := resilience.NewBuilder[struct{}](resilience.WithName("api"), resilience.WithListener(h.m)).
		AddStrategy(h.m.ExecutionTimer("api")).
		AddStrategy(limiter).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	mw, err := newMiddleware(pipeline, limiter, h)
	if err != nil {
		t.Fatal(err)
	}
	defer h.m.ObserveMiddleware("api", mw)()
	hold := make(chan struct{})
	entered := make(chan struct{}, 1)
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/late": // ignores its context: returns after its 504
			entered <- struct{}{}
			<-hold
			w.Write([]byte("too late\n"))
		default:
			w.Write([]byte("ok\n"))
		}
	})))
	defer srv.Close()
	get := func(path string) int {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	statuses := map[int]int{}
	statuses[get("/ok")]++
	statuses[get("/ok")]++
	var wg sync.WaitGroup
	var late int
	wg.Go(func() { late = get("/late") }) // 504 at 50 ms; holds the permit until released
	<-entered
	for range 2 {
		statuses[get("/ok")]++ // the one permit is held: 503 full
	}
	wg.Wait() // the 504 is out; the handler still runs
	statuses[late]++
	close(hold)
	// The handler's return is what counts the late request; wait for it
	// (Late falls back to 0 only then).
	for mw.Stats().Late != 0 || mw.Stats().InFlight != 0 {
		time.Sleep(time.Millisecond)
	}
	for range 3 {
		statuses[get("/ok")]++ // the quota is 6: one admitted, then 429s
	}
	sent := 8

	ms := h.collect()
	got := sumByAttrs(t, ms, MetricRequests)
	want := map[string]int64{}
	for _, r := range results {
		want["resilience.limiter.name=api,resilience.request.result="+r] = 0
	}
	for r, n := range map[string]int64{ResultAdmitted: 3, ResultTimeout: 1, ResultFull: 2, ResultRateLimited: 2} {
		want["resilience.limiter.name=api,resilience.request.result="+r] = n
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resilience.requests:\n got %v\nwant %v\n(statuses %v)", got, want, statuses)
	}
	var total int64
	for _, n := range got {
		total += n
	}
	if total != int64(sent) {
		t.Errorf("the results add up to %d, want the %d requests sent", total, sent)
	}
	if statuses[http.StatusGatewayTimeout] != 1 {
		t.Errorf("statuses %v, want one 504", statuses)
	}
	exec := histogram(t, ms, MetricExecutionDuration)
	if n := exec["error.type=timeout,resilience.outcome=timeout,resilience.pipeline.name=api"][0]; n != 1 {
		t.Errorf("executions timed out: %v, want 1 (all: %v)", n, exec)
	}
	if n := exec["resilience.outcome=ok,resilience.pipeline.name=api"][0]; n != 3 {
		t.Errorf("executions ok: %v, want the 3 answered by their handler (all: %v)", n, exec)
	}
}

// newMiddleware is the inbound middleware of the requests test: a quota
// of 6 requests, a 50 ms timeout, and pipeline as its concurrency stage.
func newMiddleware(pipeline *resilience.Pipeline[struct{}], limiter *resilience.ConcurrencyLimiter, h *harness) (*inbound.Middleware, error) {
	return inbound.New(inbound.Options{
		Name:         "api",
		Timeout:      50 * time.Millisecond,
		RateLimit:    &resilience.RateLimiterOptions{Name: "quota", PermitLimit: 6, Window: time.Hour},
		Pipeline:     pipeline,
		LimiterStats: limiter.Stats,
		Listener:     h.m,
	})
}

// TestObserveAlgorithm protects the adaptive limiter's gauges: once a
// sampling window has closed they report the configured bounds and the
// window's round-trip times, and nothing before.
func TestObserveAlgorithm(t *testing.T) {
	h := newHarness(t)
	alg, stop, err := h.m.ObserveAlgorithm("api", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	l, err := resilience.NewAdaptiveLimiter(resilience.AdaptiveLimiterOptions{
		InitialLimit: 4, MinLimit: 2, MaxLimit: 40, Algorithm: alg,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.m.ObserveLimiter("api", l.Stats)()
	if _, ok := h.collect()[MetricLimiterMinLimit]; ok {
		t.Fatal("bounds reported before any window closed")
	}
	floats := func() map[string]float64 {
		out := map[string]float64{}
		for name, m := range h.collect() {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					if attrs(dp.Attributes) == "resilience.limiter.name=api" {
						out[name] = float64(dp.Value)
					}
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					if attrs(dp.Attributes) == "resilience.limiter.name=api" {
						out[name] = dp.Value
					}
				}
			}
		}
		return out
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		for range 20 {
			p, ok := l.TryAcquire()
			if !ok {
				continue
			}
			time.Sleep(2 * time.Millisecond)
			p.Release(resilience.LimitSampled)
		}
		g := floats()
		if _, ok := g[MetricLimiterRTT]; ok {
			if g[MetricLimiterMinLimit] != 2 || g[MetricLimiterMaxLimit] != 40 {
				t.Errorf("bounds %v / %v, want 2 / 40", g[MetricLimiterMinLimit], g[MetricLimiterMaxLimit])
			}
			if g[MetricLimiterRTT] < 0.002 || g[MetricLimiterMinRTT] < 0.002 || g[MetricLimiterMinRTT] > g[MetricLimiterRTT] {
				t.Errorf("rtt %v, min rtt %v: want at least the 2 ms each execution took, min ≤ mean", g[MetricLimiterRTT], g[MetricLimiterMinRTT])
			}
			if g[MetricLimiterLimit] < 2 || g[MetricLimiterLimit] > 40 {
				t.Errorf("limit %v outside its bounds", g[MetricLimiterLimit])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no window closed: %v", g)
		}
	}
	if m, ok := h.collect()[MetricLimiterRTT]; !ok || m.Unit != "s" {
		t.Errorf("%s unit %q, want s", MetricLimiterRTT, m.Unit)
	}
}

// TestObserveAlgorithmForwardsValidate: a wrapped algorithm is checked as
// the bare one would be.
func TestObserveAlgorithmForwardsValidate(t *testing.T) {
	h := newHarness(t)
	alg, stop, err := h.m.ObserveAlgorithm("x", invalidAlgorithm{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := resilience.NewAdaptiveLimiter(resilience.AdaptiveLimiterOptions{Algorithm: alg}); err == nil {
		t.Fatal("NewAdaptiveLimiter accepted an algorithm whose Validate fails")
	}
}

type invalidAlgorithm struct{}

func (invalidAlgorithm) Update(s limit.Sample) float64 { return s.Limit }
func (invalidAlgorithm) Validate() error               { return fmt.Errorf("invalid on purpose") }

// TestObserveCircuit protects the circuit-state gauge: one series per
// state, 1 for the current one, following the breaker.
func TestObserveCircuit(t *testing.T) {
	h := newHarness(t)
	cb, err := resilience.NewCircuitBreaker(resilience.CircuitBreakerOptions[struct{}]{Name: "dep", MinimumThroughput: 2, FailureRatio: 0.5, BreakDuration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.m.ObserveCircuit("dep", cb.State)()
	states := func() string {
		m := h.collect()[MetricCircuitState]
		var on []string
		n := 0
		for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
			n++
			if dp.Value == 1 {
				on = append(on, attrs(dp.Attributes))
			}
		}
		return fmt.Sprint(n, on)
	}
	if got := states(); got != "4 [resilience.circuit.name=dep,resilience.circuit.state=closed]" {
		t.Fatalf("closed breaker: %s", got)
	}
	cb.Isolate(context.Background())
	if got := states(); got != "4 [resilience.circuit.name=dep,resilience.circuit.state=isolated]" {
		t.Fatalf("isolated breaker: %s", got)
	}
}
