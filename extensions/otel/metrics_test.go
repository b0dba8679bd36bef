package resilienceotel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/limit"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is a Metrics on an SDK provider read by a manual reader.
type harness struct {
	t      *testing.T
	reader *sdkmetric.ManualReader
	m      *Metrics
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	m, err := New(Options{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return &harness{t: t, reader: r, m: m}
}

// collect returns the metrics by name.
func (h *harness) collect() map[string]metricdata.Metrics {
	h.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			h.t.Fatalf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// attrs renders an attribute set as "k=v,k=v" in key order.
func attrs(s attribute.Set) string {
	var b []string
	for _, kv := range s.ToSlice() {
		b = append(b, string(kv.Key)+"="+kv.Value.String())
	}
	return strings.Join(b, ",")
}

// counts returns resilience.events' data points: attributes → value.
func counts(t *testing.T, ms map[string]metricdata.Metrics) map[string]int64 {
	t.Helper()
	m, ok := ms[MetricEvents]
	if !ok {
		return nil
	}
	if m.Unit != "{event}" {
		t.Errorf("%s unit %q", MetricEvents, m.Unit)
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok || !sum.IsMonotonic {
		t.Fatalf("%s is %T, want a monotonic Sum[int64]", MetricEvents, m.Data)
	}
	out := map[string]int64{}
	for _, dp := range sum.DataPoints {
		out[attrs(dp.Attributes)] = dp.Value
	}
	return out
}

// histogram returns a histogram's data points: attributes → (count, sum).
func histogram(t *testing.T, ms map[string]metricdata.Metrics, name string) map[string][2]float64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return nil
	}
	if m.Unit != "s" {
		t.Errorf("%s unit %q, want s", name, m.Unit)
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is %T", name, m.Data)
	}
	out := map[string][2]float64{}
	for _, dp := range h.DataPoints {
		out[attrs(dp.Attributes)] = [2]float64{float64(dp.Count), dp.Sum}
	}
	return out
}

// TestEachEventKind protects the documented mapping: each event kind core
// emits counts once in resilience.events with exactly the documented
// attributes (reason only when set, outcome from the error), and attempts
// and queue waits land in their histograms with their durations in
// seconds.
func TestEachEventKind(t *testing.T) {
	brk := &resilience.BrokenCircuitError{}
	cases := []struct {
		e     event.Event
		attrs string
		hist  string // histogram name, if the event feeds one
		hattr string
	}{
		{event.Event{Name: event.Timeout, Duration: time.Second, Err: resilience.ErrTimeoutRejected},
			"resilience.event.name=OnTimeout,resilience.outcome=timeout,resilience.pipeline.name=p,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.ConcurrencyLimiterRejected, Reason: "full", Err: &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonFull}},
			"resilience.event.name=OnConcurrencyLimiterRejected,resilience.outcome=rejected,resilience.pipeline.name=p,resilience.reason=full,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.ConcurrencyLimiterRejected, Reason: "queue-timeout", Duration: 250 * time.Millisecond, Err: &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonQueueTimeout}},
			"resilience.event.name=OnConcurrencyLimiterRejected,resilience.outcome=rejected,resilience.pipeline.name=p,resilience.reason=queue-timeout,resilience.strategy.name=s",
			MetricQueueWait, "resilience.pipeline.name=p,resilience.reason=queue-timeout,resilience.strategy.name=s"},
		{event.Event{Name: event.ConcurrencyLimiterRejected, Reason: "dropped", Duration: 250 * time.Millisecond, Err: &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonDropped}},
			"resilience.event.name=OnConcurrencyLimiterRejected,resilience.outcome=rejected,resilience.pipeline.name=p,resilience.reason=dropped,resilience.strategy.name=s",
			MetricQueueWait, "resilience.pipeline.name=p,resilience.reason=dropped,resilience.strategy.name=s"},
		{event.Event{Name: event.QueueAdmitted, Duration: 120 * time.Millisecond},
			"resilience.event.name=OnQueueAdmitted,resilience.outcome=ok,resilience.pipeline.name=p,resilience.strategy.name=s",
			MetricQueueWait, "resilience.pipeline.name=p,resilience.reason=admitted,resilience.strategy.name=s"},
		{event.Event{Name: event.RateLimiterRejected, Reason: event.ReasonRateLimited, Duration: 30 * time.Second, Err: &resilience.RateLimitRejectedError{}},
			"resilience.event.name=OnRateLimiterRejected,resilience.outcome=rejected,resilience.pipeline.name=p,resilience.reason=rate-limited,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.RateLimiterStoreError, Reason: "fail-open", Err: &resilience.RateLimitStoreError{Policy: "x", Err: errors.New("conn refused")}},
			"resilience.event.name=OnRateLimiterStoreError,resilience.outcome=error,resilience.pipeline.name=p,resilience.reason=fail-open,resilience.store.reason=other,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.RateLimiterStoreError, Reason: "fail-closed", Err: &resilience.RateLimitStoreError{Policy: "x", Err: &ratelimit.StoreError{Reason: ratelimit.StoreClusterDown, Err: errors.New("CLUSTERDOWN")}}},
			"resilience.event.name=OnRateLimiterStoreError,resilience.outcome=error,resilience.pipeline.name=p,resilience.reason=fail-closed,resilience.store.reason=cluster-down,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.RateLimiterStoreError, Reason: "fail-open", Err: &resilience.RateLimitStoreError{Policy: "x", Err: &ratelimit.StoreError{Reason: "made-up", Err: errors.New("x")}}},
			"resilience.event.name=OnRateLimiterStoreError,resilience.outcome=error,resilience.pipeline.name=p,resilience.reason=fail-open,resilience.store.reason=other,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.Retry, Attempt: 1, Duration: time.Second, Err: errors.New("boom")},
			"resilience.event.name=OnRetry,resilience.outcome=error,resilience.pipeline.name=p,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.CircuitOpened, Duration: 5 * time.Second, Err: errors.New("boom")},
			"resilience.event.name=OnCircuitOpened,resilience.outcome=error,resilience.pipeline.name=p,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.CircuitHalfOpened},
			"resilience.event.name=OnCircuitHalfOpened,resilience.outcome=ok,resilience.pipeline.name=p,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.CircuitClosed},
			"resilience.event.name=OnCircuitClosed,resilience.outcome=ok,resilience.pipeline.name=p,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.Fallback, Err: brk},
			"resilience.event.name=OnFallback,resilience.outcome=rejected,resilience.pipeline.name=p,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.Hedging, Attempt: 1},
			"resilience.event.name=OnHedging,resilience.outcome=ok,resilience.pipeline.name=p,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.ExecutionAttempt, Reason: event.ReasonHandled, Duration: 1500 * time.Millisecond, Err: context.DeadlineExceeded},
			"resilience.event.name=OnExecutionAttempt,resilience.outcome=timeout,resilience.pipeline.name=p,resilience.reason=handled,resilience.strategy.name=s",
			MetricAttemptDuration, "error.type=timeout,resilience.attempt.handled=true,resilience.outcome=timeout,resilience.pipeline.name=p,resilience.strategy.name=s"},
		{event.Event{Name: event.ConcurrencyLimiterRejected, Reason: "shutting-down", Err: &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonShuttingDown}},
			"resilience.event.name=OnConcurrencyLimiterRejected,resilience.outcome=rejected,resilience.pipeline.name=p,resilience.reason=shutting-down,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.HookPanic, Reason: event.HookLimitAlgorithm, Err: &resilience.HookPanicError{Hook: event.HookLimitAlgorithm, Value: "boom"}},
			"resilience.event.name=OnHookPanic,resilience.outcome=error,resilience.pipeline.name=p,resilience.reason=limit.Algorithm.Update,resilience.strategy.name=s", "", ""},
		{event.Event{Name: event.ExecutionAttempt, Reason: event.ReasonUnhandled, Duration: 20 * time.Millisecond},
			"resilience.event.name=OnExecutionAttempt,resilience.outcome=ok,resilience.pipeline.name=p,resilience.reason=unhandled,resilience.strategy.name=s",
			MetricAttemptDuration, "resilience.attempt.handled=false,resilience.outcome=ok,resilience.pipeline.name=p,resilience.strategy.name=s"},
	}
	for _, c := range cases {
		t.Run(string(c.e.Name)+"/"+c.e.Reason, func(t *testing.T) {
			h := newHarness(t)
			tel := resilience.NewTelemetry("p", "s", h.m)
			tel.Emit(context.Background(), c.e)
			tel.Emit(context.Background(), c.e)
			ms := h.collect()
			got := counts(t, ms)
			if len(got) != 1 || got[c.attrs] != 2 {
				t.Fatalf("resilience.events: %v, want {%s: 2}", got, c.attrs)
			}
			for _, name := range []string{MetricAttemptDuration, MetricQueueWait} {
				hd := histogram(t, ms, name)
				if name != c.hist {
					if len(hd) != 0 {
						t.Fatalf("%s recorded %v for this event", name, hd)
					}
					continue
				}
				want := [2]float64{2, 2 * c.e.Duration.Seconds()}
				if len(hd) != 1 || hd[c.hattr] != want {
					t.Fatalf("%s: %v, want {%s: %v}", name, hd, c.hattr, want)
				}
			}
		})
	}
}

// TestPipelineEventsAndExecutionTime protects the wiring through a real
// pipeline: the timer records one execution per call with its outcome, and
// a retry's attempts and retries arrive as events and attempt durations.
func TestPipelineEventsAndExecutionTime(t *testing.T) {
	h := newHarness(t)
	p, err := resilience.NewBuilder[struct{}](resilience.WithName("orders"), resilience.WithListener(h.m)).
		AddStrategy(h.m.ExecutionTimer("orders")).
		AddRetry(resilience.RetryOptions[struct{}]{Name: "retry", MaxRetryAttempts: 2, Delay: time.Millisecond}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, err = p.Execute(context.Background(), func(context.Context) (struct{}, error) {
		calls++
		if calls < 3 {
			return struct{}{}, errors.New("flaky")
		}
		return struct{}{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = p.Execute(context.Background(), func(context.Context) (struct{}, error) {
		return struct{}{}, context.DeadlineExceeded
	})
	ms := h.collect()
	ev := counts(t, ms)
	base := ",resilience.pipeline.name=orders,resilience.strategy.name=retry"
	if n := ev["resilience.event.name=OnRetry,resilience.outcome=error"+base]; n != 2 {
		t.Errorf("OnRetry with error: %d, want 2 (%v)", n, ev)
	}
	if n := ev["resilience.event.name=OnExecutionAttempt,resilience.outcome=ok,resilience.pipeline.name=orders,resilience.reason=unhandled,resilience.strategy.name=retry"]; n != 1 {
		t.Errorf("successful attempts: %d, want 1 (%v)", n, ev)
	}
	att := histogram(t, ms, MetricAttemptDuration)
	var attempts float64
	for _, v := range att {
		attempts += v[0]
	}
	if attempts != 6 {
		t.Errorf("attempt durations: %v, want 6 attempts", att)
	}
	exec := histogram(t, ms, MetricExecutionDuration)
	if exec["resilience.outcome=ok,resilience.pipeline.name=orders"][0] != 1 ||
		exec["error.type=timeout,resilience.outcome=timeout,resilience.pipeline.name=orders"][0] != 1 || len(exec) != 2 {
		t.Errorf("execution durations: %v", exec)
	}
}

// TestQueueWaitsThroughALimiter protects resilience.queue.wait on a real
// concurrency limiter: the wait of an execution admitted after queueing
// and that of one rejected at its queue timeout are both recorded, each
// with its duration and how it ended, while an execution admitted at once
// records none.
func TestQueueWaitsThroughALimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		l, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{
			Name: "bulkhead", PermitLimit: 1, QueueLimit: 1, QueueTimeout: 500 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		p, err := resilience.NewBuilder[struct{}](resilience.WithName("orders"), resilience.WithListener(h.m)).AddStrategy(l).Build()
		if err != nil {
			t.Fatal(err)
		}
		run := func(hold time.Duration) error {
			_, err := p.Execute(context.Background(), func(context.Context) (struct{}, error) {
				time.Sleep(hold)
				return struct{}{}, nil
			})
			return err
		}
		var wg sync.WaitGroup
		wg.Go(func() { _ = run(200 * time.Millisecond) }) // admitted at once
		synctest.Wait()
		wg.Go(func() { _ = run(time.Second) }) // queued 200 ms, then admitted
		wg.Wait()
		wg.Go(func() { _ = run(time.Second) }) // admitted at once, holds 1 s
		synctest.Wait()
		if err := run(0); !errors.Is(err, resilience.ErrConcurrencyLimitRejected) { // queued 500 ms, times out
			t.Fatalf("third execution: %v, want a queue timeout", err)
		}
		wg.Wait()

		got := histogram(t, h.collect(), MetricQueueWait)
		base := "resilience.pipeline.name=orders,resilience.reason="
		want := map[string][2]float64{
			base + "admitted,resilience.strategy.name=bulkhead":      {1, 0.2},
			base + "queue-timeout,resilience.strategy.name=bulkhead": {1, 0.5},
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %v, want %v", MetricQueueWait, got, want)
		}
	})
}

// TestMiddlewareGauges protects the gauges: a middleware's limit, its
// in-flight and queued requests and its late handlers are read at
// collection time, under the limiter's name, and stop reporting after stop.
func TestMiddlewareGauges(t *testing.T) {
	h := newHarness(t)
	mw, err := inbound.New(inbound.Options{
		Name:        "api",
		Timeout:     50 * time.Millisecond,
		TimeoutFrom: inbound.TimeoutFromAdmission, // the queued request waits past the 50 ms
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2, QueueLimit: 4, QueueTimeout: 10 * time.Second},
		Listener:    h.m,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := h.m.ObserveMiddleware("api", mw)
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release // ignores its context: runs late past the 50 ms timeout
	})))
	defer srv.Close()
	done := make(chan int, 3)
	for range 3 {
		go func() {
			resp, err := http.Get(srv.URL)
			if err != nil {
				done <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	<-started
	<-started
	// Two handlers hold the permits and run late after their 504s; the third
	// request waits in the queue.
	want := map[string]int64{MetricLimiterLimit: 2, MetricLimiterInFlight: 2, MetricLimiterQueued: 1, MetricLimiterLate: 2}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := gauges(t, h.collect(), "resilience.limiter.name=api")
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gauges %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	for range 3 {
		<-done
	}
	stop()
	if got := gauges(t, h.collect(), "resilience.limiter.name=api"); len(got) != 0 {
		t.Fatalf("after stop: %v", got)
	}
}

// gauges returns the four limiter instruments' values for one attribute set.
func gauges(t *testing.T, ms map[string]metricdata.Metrics, set string) map[string]int64 {
	t.Helper()
	units := map[string]string{MetricLimiterLimit: "{permit}", MetricLimiterInFlight: "{execution}", MetricLimiterQueued: "{execution}", MetricLimiterLate: "{execution}"}
	out := map[string]int64{}
	for name, unit := range units {
		m, ok := ms[name]
		if !ok {
			continue
		}
		if m.Unit != unit {
			t.Errorf("%s unit %q, want %q", name, m.Unit, unit)
		}
		var dps []metricdata.DataPoint[int64]
		switch d := m.Data.(type) {
		case metricdata.Gauge[int64]:
			dps = d.DataPoints
		case metricdata.Sum[int64]:
			if d.IsMonotonic {
				t.Errorf("%s is monotonic", name)
			}
			dps = d.DataPoints
		default:
			t.Fatalf("%s is %T", name, m.Data)
		}
		for _, dp := range dps {
			if attrs(dp.Attributes) == set {
				out[name] = dp.Value
			}
		}
	}
	return out
}

// TestObserveLimiter protects the gauges of a plain limiter: limit,
// in-flight and queued, and no late gauge (a limiter has no deadline).
func TestObserveLimiter(t *testing.T) {
	h := newHarness(t)
	l, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer h.m.ObserveLimiter("db", l.Stats)()
	p, ok := l.TryAcquire()
	if !ok {
		t.Fatal("no permit")
	}
	defer p.Release()
	got := gauges(t, h.collect(), "resilience.limiter.name=db")
	want := map[string]int64{MetricLimiterLimit: 3, MetricLimiterInFlight: 1, MetricLimiterQueued: 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("gauges %v, want %v", got, want)
	}
}

// TestCardinalityBounded protects backends from unbounded series: events
// carrying per-request data (keys, paths, addresses, error texts, unknown
// names and reasons) produce no more attribute sets than the known labels
// allow, and none of that data appears in any attribute.
func TestCardinalityBounded(t *testing.T) {
	h := newHarness(t)
	rng := rand.New(rand.NewPCG(1, 2))
	names := []event.Name{event.Timeout, event.RateLimiterRejected, event.Retry, "OnCustom"}
	tel := resilience.NewTelemetry("api", "limiter", h.m)
	for i := range 20_000 {
		secret := fmt.Sprintf("client-10.0.%d.%d/path/%d", rng.IntN(256), rng.IntN(256), i)
		tel.Emit(context.Background(), event.Event{
			Name:     names[rng.IntN(len(names))],
			Reason:   []string{"full", "rate-limited", secret}[rng.IntN(3)],
			Err:      []error{nil, errors.New(secret), &resilience.RateLimitRejectedError{}}[rng.IntN(3)],
			Duration: time.Duration(rng.IntN(1000)) * time.Millisecond,
		})
	}
	ev := counts(t, h.collect())
	// 4 event names × 3 reasons (full, rate-limited, other) × 3 outcomes.
	if len(ev) > 36 {
		t.Fatalf("%d attribute sets from 20 000 events, want at most 36", len(ev))
	}
	for set := range ev {
		if strings.Contains(set, "client-") || strings.Contains(set, "/path/") {
			t.Fatalf("per-request data in attributes: %s", set)
		}
	}
	long := strings.Repeat("x", 500)
	resilience.NewTelemetry(long, long, h.m).Emit(context.Background(), event.Event{Name: event.Timeout})
	for set := range counts(t, h.collect()) {
		if strings.Contains(set, strings.Repeat("x", maxNameLen+1)) {
			t.Fatalf("name not cut to %d bytes: %s", maxNameLen, set)
		}
	}
}

// TestOnEventAllocatesNothing protects the listener's cost: once an event's
// attribute set has been seen, recording it allocates nothing in this
// package (measured on the no-op provider, so the SDK's own work is out).
func TestOnEventAllocatesNothing(t *testing.T) {
	m, err := New(Options{MeterProvider: noop.NewMeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tel := resilience.NewTelemetry("api", "limiter", m)
	e := event.Event{Name: event.ConcurrencyLimiterRejected, Reason: "queue-timeout", Duration: time.Millisecond, Err: &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonQueueTimeout}}
	ctx := context.Background()
	tel.Emit(ctx, e)
	if n := testing.AllocsPerRun(1000, func() { tel.Emit(ctx, e) }); n != 0 {
		t.Fatalf("OnEvent: %v allocations, want 0", n)
	}
	timer := m.ExecutionTimer("api")
	run := func() { _ = timer.Execute(ctx, tel, func(context.Context) error { return nil }) }
	run()
	if n := testing.AllocsPerRun(1000, run); n != 0 {
		t.Fatalf("ExecutionTimer: %v allocations, want 0", n)
	}
}

// TestDocTableMatchesInstruments protects the package documentation's
// instrument table: every instrument the package creates is in it, and
// each row's kind, unit and attribute keys are what the instrument really
// has once every kind of measurement has been made.
func TestDocTableMatchesInstruments(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ kind, unit, attrs string }
	table := map[string]row{}
	paren := regexp.MustCompile(`\s*\([^)]*\)`)
	for _, line := range strings.Split(string(src), "\n") {
		rest, ok := strings.CutPrefix(line, "//\tresilience.")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 4 {
			t.Fatalf("table row %q: want name, kind, unit and attributes", line)
		}
		var keys []string
		for _, k := range strings.Split(paren.ReplaceAllString(strings.Join(f[3:], " "), ""), ",") {
			k = strings.TrimSpace(k)
			if !strings.HasPrefix(k, "error.") { // OpenTelemetry's own keys are written in full
				k = "resilience." + k
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		unit := f[2]
		if unit == "-" {
			unit = ""
		}
		table["resilience."+f[0]] = row{f[1], unit, strings.Join(keys, ",")}
	}

	h := newHarness(t)
	tel := resilience.NewTelemetry("p", "s", h.m)
	ctx := context.Background()
	tel.Emit(ctx, event.Event{Name: event.RateLimiterRejected, Reason: event.ReasonRateLimited, Err: &resilience.RateLimitRejectedError{}})
	tel.Emit(ctx, event.Event{Name: event.ExecutionAttempt, Reason: event.ReasonHandled, Duration: time.Millisecond})
	tel.Emit(ctx, event.Event{Name: event.ExecutionAttempt, Reason: event.ReasonHandled, Duration: time.Millisecond, Err: errors.New("failed")})
	tel.Emit(ctx, event.Event{Name: event.QueueAdmitted, Duration: time.Millisecond})
	tel.Emit(ctx, event.Event{Name: event.Reconfigured, Reason: event.ReasonReconfigureOK})
	_ = h.m.ExecutionTimer("p").Execute(ctx, tel, func(context.Context) error { return nil })
	_ = h.m.ExecutionTimer("p").Execute(ctx, tel, func(context.Context) error { return context.DeadlineExceeded })
	alg, stopAlg, err := h.m.ObserveAlgorithm("api", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stopAlg()
	alg.Update(limit.Sample{Limit: 10, MinLimit: 2, MaxLimit: 50, RTT: time.Millisecond, MinRTT: time.Millisecond, Samples: 10})
	defer h.m.ObserveCircuit("dep", func() resilience.CircuitState { return resilience.CircuitOpen })()
	mw, err := inbound.New(inbound.Options{Name: "api", Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2},
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Hour}, Shadow: inbound.Shadow{RateLimit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.m.ObserveMiddleware("api", mw)()
	for range 2 { // the second is refused in shadow: resilience.requests.shadow
		mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}

	ms := h.collect()
	if len(ms) != len(table) {
		t.Errorf("%d instruments collected, %d in the table", len(ms), len(table))
	}
	for name, m := range ms {
		r, ok := table[name]
		if !ok {
			t.Errorf("%s is not in the package documentation's table", name)
			continue
		}
		var kind string
		keys := map[string]bool{}
		addKeys := func(s attribute.Set) {
			for _, kv := range s.ToSlice() {
				keys[string(kv.Key)] = true
			}
		}
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			kind = "ObservableUpDownCounter"
			if d.IsMonotonic {
				kind = "Counter"
			}
			for _, dp := range d.DataPoints {
				addKeys(dp.Attributes)
			}
		case metricdata.Gauge[int64]:
			kind = "ObservableGauge"
			for _, dp := range d.DataPoints {
				addKeys(dp.Attributes)
			}
		case metricdata.Gauge[float64]:
			kind = "ObservableGauge"
			for _, dp := range d.DataPoints {
				addKeys(dp.Attributes)
			}
		case metricdata.Histogram[float64]:
			kind = "Histogram"
			for _, dp := range d.DataPoints {
				addKeys(dp.Attributes)
			}
		default:
			t.Fatalf("%s: data %T", name, m.Data)
		}
		got := slices.Sorted(maps.Keys(keys))
		if kind == "Counter" && r.kind == "ObservableCounter" {
			kind = r.kind // the data cannot tell the two apart
		}
		if kind != r.kind || m.Unit != r.unit || strings.Join(got, ",") != r.attrs {
			t.Errorf("%s: %s, unit %s, attributes %v; the table says %s, %s, %s", name, kind, m.Unit, got, r.kind, r.unit, r.attrs)
		}
	}
}

// TestReadmeTableMatchesDoc keeps the README's instrument table the
// package documentation's: the same instruments, each with the same kind,
// unit and attributes (TestDocTableMatchesInstruments checks those
// against the instruments themselves).
func TestReadmeTableMatchesDoc(t *testing.T) {
	norm := func(s string) string { return strings.Join(strings.Fields(strings.ReplaceAll(s, "`", "")), " ") }
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if rest, ok := strings.CutPrefix(line, "//\tresilience."); ok {
			f := strings.Fields(rest)
			want["resilience."+f[0]] = norm(strings.Join(f[1:], " "))
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(readme), "\n") {
		rest, ok := strings.CutPrefix(line, "| `resilience.")
		if !ok {
			continue
		}
		cells := strings.Split(strings.Trim(rest, " |"), "|")
		if len(cells) != 4 {
			t.Fatalf("README row %q: want name, kind, unit and attributes", line)
		}
		unit := norm(cells[2])
		if unit == "none" {
			unit = "-" // doc.go's column cannot be empty
		}
		got["resilience."+strings.TrimSuffix(strings.TrimSpace(cells[0]), "`")] = norm(cells[1] + " " + unit + " " + cells[3])
	}
	if len(want) == 0 || !maps.Equal(got, want) {
		t.Fatalf("README table\n%v\nwant doc.go's\n%v", got, want)
	}
}

// A middleware's Reconfigure counts in resilience.reloads by result, and
// as an OnReconfigured event.
func TestReloadsCounted(t *testing.T) {
	h := newHarness(t)
	opts := inbound.Options{Name: "api", Listener: h.m, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2}}
	mw, err := inbound.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Concurrency = &resilience.ConcurrencyLimiterOptions{PermitLimit: 7}
	if err := mw.Reconfigure(opts); err != nil {
		t.Fatal(err)
	}
	opts.Concurrency = &resilience.ConcurrencyLimiterOptions{PermitLimit: -3}
	if err := mw.Reconfigure(opts); err == nil {
		t.Fatal("a negative limit was applied")
	}
	ms := h.collect()
	sum, ok := ms[MetricReloads].Data.(metricdata.Sum[int64])
	if !ok || !sum.IsMonotonic {
		t.Fatalf("%s: %T", MetricReloads, ms[MetricReloads].Data)
	}
	got := map[string]int64{}
	for _, dp := range sum.DataPoints {
		got[attrs(dp.Attributes)] = dp.Value
	}
	want := map[string]int64{
		"resilience.pipeline.name=api,resilience.reload.result=ok":     1,
		"resilience.pipeline.name=api,resilience.reload.result=failed": 1,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("reloads %v, want %v", got, want)
	}
	if c := counts(t, ms); c["resilience.event.name=OnReconfigured,resilience.outcome=error,resilience.pipeline.name=api,resilience.reason=failed,resilience.strategy.name=Reconfigure"] != 1 {
		t.Fatalf("events %v", c)
	}
}
