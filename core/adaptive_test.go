package resilience

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/limit"
)

func wantConfigField(t testing.TB, err error, field string) {
	t.Helper()
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != field || !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("err = %v, want a *ConfigError for %s", err, field)
	}
}

func newTestAdaptive(t testing.TB, opts AdaptiveLimiterOptions) *AdaptiveLimiter {
	t.Helper()
	a, err := NewAdaptiveLimiter(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAdaptiveLimiterOptionsValidation(t *testing.T) {
	cases := []struct {
		opts  AdaptiveLimiterOptions
		field string
	}{
		{AdaptiveLimiterOptions{InitialLimit: -1}, "AdaptiveLimiterOptions.InitialLimit"},
		{AdaptiveLimiterOptions{MinLimit: -1}, "AdaptiveLimiterOptions.MinLimit"},
		{AdaptiveLimiterOptions{MaxLimit: -1}, "AdaptiveLimiterOptions.MaxLimit"},
		{AdaptiveLimiterOptions{QueueLimit: -1}, "AdaptiveLimiterOptions.QueueLimit"},
		{AdaptiveLimiterOptions{MinLimit: 10, MaxLimit: 5}, "AdaptiveLimiterOptions.MinLimit"},
		{AdaptiveLimiterOptions{InitialLimit: 2000}, "AdaptiveLimiterOptions.InitialLimit"},
		{AdaptiveLimiterOptions{QueueTimeout: -1}, "AdaptiveLimiterOptions.QueueTimeout"},
		{AdaptiveLimiterOptions{Overflow: "nope"}, "AdaptiveLimiterOptions.Overflow"},
		{AdaptiveLimiterOptions{CoDel: &CoDelOptions{Target: -1}}, "AdaptiveLimiterOptions.CoDel.Target"},
	}
	for _, c := range cases {
		_, err := NewAdaptiveLimiter(c.opts)
		wantConfigField(t, err, c.field)
		_, err = NewBuilder[int]().AddAdaptiveLimiter(c.opts).Build()
		wantConfigField(t, err, c.field)
	}
	var zero AdaptiveLimiter
	if zero.validate() == nil {
		t.Fatal("zero AdaptiveLimiter validated")
	}
}

// Invariant: a nil pointer to a built-in algorithm (on which Update would
// panic every window) is refused when the limiter is built, naming
// AdaptiveLimiterOptions.Algorithm; their zero values are the algorithms
// with default options and are accepted.
func TestNilAlgorithmRefused(t *testing.T) {
	for _, alg := range []limit.Algorithm{(*limit.Gradient2)(nil), (*limit.Vegas)(nil), (*limit.AIMD)(nil)} {
		_, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{Algorithm: alg})
		wantConfigField(t, err, "AdaptiveLimiterOptions.Algorithm")
		_, err = NewBuilder[int]().AddAdaptiveLimiter(AdaptiveLimiterOptions{Algorithm: alg}).Build()
		wantConfigField(t, err, "AdaptiveLimiterOptions.Algorithm")
	}
	for _, alg := range []limit.Algorithm{&limit.Gradient2{}, &limit.Vegas{}, &limit.AIMD{}} {
		if _, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{Algorithm: alg}); err != nil {
			t.Errorf("zero %T: %v", alg, err)
		}
	}
}

func TestLimitAlgorithmOptionsValidation(t *testing.T) {
	_, err := limit.NewGradient2(limit.Gradient2Options{Smoothing: 2})
	wantConfigField(t, err, "Gradient2Options.Smoothing")
	_, err = limit.NewGradient2(limit.Gradient2Options{DropBackoff: 1})
	wantConfigField(t, err, "Gradient2Options.DropBackoff")
	_, err = limit.NewGradient2(limit.Gradient2Options{BaselineWindows: -1})
	wantConfigField(t, err, "Gradient2Options.BaselineWindows")
	_, err = limit.NewVegas(limit.VegasOptions{Alpha: 10, Beta: 5})
	wantConfigField(t, err, "VegasOptions.Alpha")
	_, err = limit.NewVegas(limit.VegasOptions{Threshold: -1})
	wantConfigField(t, err, "VegasOptions.Threshold")
	_, err = limit.NewAIMD(limit.AIMDOptions{BackoffRatio: 1.5})
	wantConfigField(t, err, "AIMDOptions.BackoffRatio")
	_, err = limit.NewAIMD(limit.AIMDOptions{Timeout: -1})
	wantConfigField(t, err, "AIMDOptions.Timeout")
}

// Option validation never panics and either accepts the options or names
// a field.
func FuzzAdaptiveLimiterOptions(f *testing.F) {
	f.Add(0, 0, 0, 0, int64(0), 0.0, 0.0)
	f.Add(20, 1, 1000, 10, int64(time.Second), 1.5, 0.2)
	f.Add(-1, 5, 2, -3, int64(-1), 0.5, 3.0)
	f.Fuzz(func(t *testing.T, initial, minL, maxL, queue int, qt int64, tol, smooth float64) {
		_, gerr := limit.NewGradient2(limit.Gradient2Options{Tolerance: tol, Smoothing: smooth})
		if gerr != nil {
			var ce *ConfigError
			if !errors.As(gerr, &ce) {
				t.Fatalf("not a *ConfigError: %v", gerr)
			}
		}
		a, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{InitialLimit: initial, MinLimit: minL, MaxLimit: maxL,
			QueueLimit: queue, QueueTimeout: time.Duration(qt)})
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field == "" {
				t.Fatalf("not a *ConfigError naming a field: %v", err)
			}
			return
		}
		if s := a.Stats(); s.Limit < 1 || s.Limit < a.minLimit || s.Limit > a.maxLimit {
			t.Fatalf("initial limit %d outside [%d, %d]", s.Limit, a.minLimit, a.maxLimit)
		}
	})
}

func TestAdaptiveLimiterDefaults(t *testing.T) {
	a := newTestAdaptive(t, AdaptiveLimiterOptions{})
	if got := a.Stats(); got != (LimiterStats{Limit: 20}) {
		t.Fatalf("Stats() = %+v", got)
	}
	if lo, hi := a.Bounds(); lo != 1 || hi != 1000 || StrategyName(a) != "AdaptiveLimiter" {
		t.Fatalf("defaults: bounds %d..%d name %q", lo, hi, StrategyName(a))
	}
	if err := a.Reconfigure(AdaptiveLimiterOptions{MaxLimit: 50}); err != nil {
		t.Fatal(err)
	}
	if lo, hi := a.Bounds(); lo != 1 || hi != 50 {
		t.Fatalf("after Reconfigure(MaxLimit 50): bounds %d..%d, want 1..50", lo, hi)
	}
	var zero AdaptiveLimiter
	if lo, hi := zero.Bounds(); lo != 0 || hi != 0 {
		t.Fatalf("zero limiter: bounds %d..%d, want 0..0", lo, hi)
	}
	if _, ok := a.alg.(*limit.Gradient2); !ok {
		t.Fatalf("default algorithm %T", a.alg)
	}
}

// Netflix concurrency-limits #176: a window with drops lowers the limit in
// every built-in algorithm (drops are used, not ignored).
func TestLimitAlgorithmsUseDrops(t *testing.T) {
	for _, a := range simAlgorithms() {
		alg := a.new()
		s := limit.Sample{Limit: 100, MinLimit: 1, MaxLimit: 1000, RTT: 10 * time.Millisecond, InFlight: 100, Samples: 50}
		alg.Update(s) // a baseline
		s.Drops = 1
		if got := alg.Update(s); got >= 100 {
			t.Errorf("%s: limit after a window with drops = %v, want below 100", a.name, got)
		}
	}
}

// The adaptive limiter shares the fixed limiter's queue engine: queued
// executions are granted by priority, and overflow policies apply.
func TestAdaptiveLimiterUsesPriorityQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newTestAdaptive(t, AdaptiveLimiterOptions{InitialLimit: 1, QueueLimit: 2, Priority: clPriority,
			Overflow: OverflowDropLowestPriority})
		p, err := a.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		res := make(map[int]chan error)
		for _, prio := range []int{5, 1, 0} { // the third evicts priority 5
			ch := make(chan error, 1)
			res[prio] = ch
			ctx := clPriorityKey.With(context.Background(), prio)
			go func() {
				q, err := a.Acquire(ctx)
				ch <- err
				if err == nil {
					time.Sleep(time.Millisecond)
					q.Release(LimitSampled)
				}
			}()
			synctest.Wait()
		}
		wantReason(t, <-res[5], ReasonDropped)
		p.Release(LimitSampled)
		if err := <-res[0]; err != nil {
			t.Fatal(err)
		}
		if err := <-res[1]; err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // both finish their work
		synctest.Wait()
		if s := a.Stats(); s.InFlight != 0 || s.Queued != 0 {
			t.Fatalf("after: %+v", s)
		}
	})
}

// An execution admitted after queueing emits event.QueueAdmitted with its
// wait, as with ConcurrencyLimiter; one admitted at once emits nothing.
func TestAdaptiveLimiterExecuteQueueAdmittedTelemetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newTestAdaptive(t, AdaptiveLimiterOptions{InitialLimit: 1, MinLimit: 1, QueueLimit: 1, QueueTimeout: time.Second})
		rec := &clRecorder{}
		tel := NewTelemetry("p", "a", rec)
		release := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			_ = a.Execute(context.Background(), tel, func(context.Context) error {
				<-release
				return nil
			})
		})
		synctest.Wait()
		wg.Go(func() {
			if err := a.Execute(context.Background(), tel, func(context.Context) error { return nil }); err != nil {
				t.Errorf("queued Execute: %v", err)
			}
		})
		synctest.Wait()
		time.Sleep(40 * time.Millisecond)
		close(release)
		wg.Wait()
		ev := rec.snapshot()
		if len(ev) != 1 || ev[0].Name != event.QueueAdmitted || ev[0].Duration != 40*time.Millisecond || ev[0].Pipeline != "p" || ev[0].Strategy != "a" {
			t.Fatalf("events %+v, want one event.QueueAdmitted after 40ms", ev)
		}
	})
}

// Invariant 2: a panic in the callback returns the permit (without a
// sample) and propagates; a rejection emits event.ConcurrencyLimiterRejected.
func TestAdaptiveLimiterExecutePanicAndReject(t *testing.T) {
	a := newTestAdaptive(t, AdaptiveLimiterOptions{InitialLimit: 1})
	rec := &clRecorder{}
	tel := NewTelemetry("p", "a", rec)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic did not propagate")
			}
		}()
		_ = a.Execute(context.Background(), tel, func(ctx context.Context) error {
			err := a.Execute(ctx, tel, func(context.Context) error { return nil })
			wantReason(t, err, ReasonFull)
			panic("boom")
		})
	}()
	if s := a.Stats(); s.InFlight != 0 {
		t.Fatalf("permit lost: %+v", s)
	}
	if ev := rec.snapshot(); len(ev) != 1 || ev[0].Name != event.ConcurrencyLimiterRejected || ev[0].Reason != "full" {
		t.Fatalf("events %+v", ev)
	}
}

// A lowered limit never interrupts running work: in flight stays above it
// until executions finish, and nothing new is admitted meanwhile.
func TestAdaptiveLimitDecreaseDoesNotInterrupt(t *testing.T) {
	a := newTestAdaptive(t, AdaptiveLimiterOptions{Algorithm: fixedAlg(2), InitialLimit: 12})
	var ps []AdaptivePermit
	for range 12 {
		p, ok := a.TryAcquire()
		if !ok {
			t.Fatal("not admitted")
		}
		ps = append(ps, p)
	}
	for _, p := range ps[:10] { // closes a window: the algorithm says 2
		p.Release(LimitSampled)
	}
	if s := a.Stats(); s.Limit != 2 || s.InFlight != 2 {
		t.Fatalf("after the update: %+v", s)
	}
	if _, ok := a.TryAcquire(); ok {
		t.Fatal("admitted at in flight 2, limit 2")
	}
	ps[10].Release(LimitIgnored)
	p, ok := a.TryAcquire()
	if !ok {
		t.Fatal("in flight 1 < limit 2, want admitted")
	}
	p.Release(LimitIgnored)
	ps[11].Release(LimitIgnored)
	defer func() {
		if recover() == nil {
			t.Fatal("releasing the zero permit did not panic")
		}
	}()
	AdaptivePermit{}.Release(LimitSampled)
}

// fixedAlg always answers the same limit.
type fixedAlg float64

func (f fixedAlg) Update(limit.Sample) float64 { return float64(f) }

// A user algorithm that panics or answers NaN leaves the limiter working.
func TestAdaptiveLimiterSurvivesBadAlgorithm(t *testing.T) {
	a := newTestAdaptive(t, AdaptiveLimiterOptions{Algorithm: fixedAlg(nan()), InitialLimit: 1})
	p, _ := a.TryAcquire()
	p.Release(LimitSampled)
	if s := a.Stats(); s.Limit != 1 {
		t.Fatalf("NaN changed the limit: %+v", s)
	}
}

// A panicking limit.Algorithm stays where it ran: the execution whose
// release closed the window is not failed by it (neither through Release
// nor through Execute), the previous limit stands, the next window is
// handed over as usual, and the panic is reported as event.HookPanic.
func TestAdaptiveAlgorithmPanicIsContained(t *testing.T) {
	alg := &panicOnceAlg{}
	b := newTestAdaptive(t, AdaptiveLimiterOptions{Algorithm: alg, InitialLimit: 3})
	p1, _ := b.TryAcquire()
	p2, _ := b.TryAcquire()
	p, _ := b.TryAcquire()
	if err := errors.Join(p1.Release(LimitSampled), p2.Release(LimitSampled)); err != nil {
		t.Fatal(err)
	}
	err := p.Release(LimitSampled) // the first window closes: the algorithm panics
	var hp *HookPanicError
	if !errors.As(err, &hp) || hp.Hook != event.HookLimitAlgorithm || hp.Value != "algorithm bug" {
		t.Fatalf("Release = %v, want a *HookPanicError for %s", err, event.HookLimitAlgorithm)
	}
	if s := b.Stats(); b.updating || s.InFlight != 0 || s.Limit != 3 {
		t.Fatalf("after a panicking algorithm: %+v (updating %v), want the permit back and limit 3", s, b.updating)
	}

	// Through Execute: the execution succeeds and the event names the hook.
	var events []event.Event
	tel := NewTelemetry("p", "a", event.ListenerFunc(func(_ context.Context, e event.Event) { events = append(events, e) }))
	c := newTestAdaptive(t, AdaptiveLimiterOptions{Algorithm: &panicOnceAlg{}, InitialLimit: 3})
	for i := 0; i < 3; i++ { // the third closes the first window
		if err := c.Execute(context.Background(), tel, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("Execute = %v, want the callback's nil", err)
		}
	}
	if len(events) != 1 || events[0].Name != event.HookPanic || events[0].Reason != event.HookLimitAlgorithm || !errors.As(events[0].Err, &hp) {
		t.Fatalf("events = %+v, want one %s", events, event.HookPanic)
	}
	if s := c.Stats(); s.Limit != 3 || s.InFlight != 0 {
		t.Fatalf("stats = %+v, want limit 3 and nothing in flight", s)
	}
	// The next window goes to the algorithm as usual and its limit applies.
	for i := 0; i < 2*windowMinSamples && c.Stats().Limit == 3; i++ {
		time.Sleep(2 * time.Millisecond) // windows close after at least a millisecond
		_ = c.Execute(context.Background(), tel, func(context.Context) error { return nil })
	}
	if s := c.Stats(); s.Limit != 7 {
		t.Fatalf("limit %d after the algorithm recovered, want its 7", s.Limit)
	}
}

// panicOnceAlg panics on its first update and answers 7 after.
type panicOnceAlg struct{ n int }

func (a *panicOnceAlg) Update(limit.Sample) float64 {
	a.n++
	if a.n == 1 {
		panic("algorithm bug")
	}
	return 7
}

func nan() float64 { var z float64; return z / z }

// countingAlg counts its updates and keeps the limit.
type countingAlg struct{ n int }

func (c *countingAlg) Update(s limit.Sample) float64 { c.n++; return s.Limit }

// Sampled timing: the first denseTimed executions of a window are timed,
// then one in sparseEvery (weighted by sparseEvery); untimed releases
// never close a window, however late, but still count as samples, drops
// and in-flight; the next timed release closes it, and the window's mean
// weighs each timed execution by the inverse of its chance to be timed.
func TestAdaptiveUntimedExecutionsNeverCloseAWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		alg := &countingAlg{}
		a := newTestAdaptive(t, AdaptiveLimiterOptions{Algorithm: alg, InitialLimit: 1000})
		const n = 1000
		var dense, sparse, untimed []AdaptivePermit
		for range n {
			p, ok := a.TryAcquire()
			if !ok {
				t.Fatal("not admitted")
			}
			switch p.weight {
			case 1:
				dense = append(dense, p)
			case sparseEvery:
				sparse = append(sparse, p)
			case 0:
				untimed = append(untimed, p)
			default:
				t.Fatalf("weight %d", p.weight)
			}
		}
		if len(dense) != denseTimed {
			t.Fatalf("%d executions timed in full, want %d", len(dense), denseTimed)
		}
		// One in sparseEvery of the rest, give or take the pseudo-random pick.
		if want := (n - denseTimed) / sparseEvery; len(sparse) < want/2 || len(sparse) > 2*want {
			t.Fatalf("%d of %d executions timed sparsely, want about %d", len(sparse), n-denseTimed, want)
		}
		time.Sleep(2 * time.Second) // past the longest window
		for i, p := range untimed {
			o := LimitSampled
			if i%2 == 1 {
				o = LimitDropped
			}
			p.Release(o)
		}
		if alg.n != 0 {
			t.Fatalf("an untimed release closed a window (%d updates)", alg.n)
		}
		a.engine.Lock()
		w := a.win
		a.engine.Unlock()
		if w.samples+w.drops != len(untimed) || w.timed != 0 || w.maxInFlight != n {
			t.Fatalf("untimed releases not counted: %+v", w)
		}
		// A timed release has the clock reading and closes the window.
		sparse[0].Release(LimitSampled)
		if alg.n != 1 {
			t.Fatalf("a timed release after 2 s did not close the window (%d updates)", alg.n)
		}
		for _, p := range append(dense, sparse[1:]...) {
			p.Release(LimitIgnored)
		}
		if s := a.Stats(); s.InFlight != 0 {
			t.Fatalf("permits lost: %+v", s)
		}
	})
}

// The window's mean round-trip time weighs sparsely timed executions by
// sparseEvery, so it estimates the mean over all executions.
func TestAdaptiveWeightedMean(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &windowRecorder{Algorithm: fixedAlg(100)}
		a := newTestAdaptive(t, AdaptiveLimiterOptions{Algorithm: rec, InitialLimit: 100})
		// Hand-made permits: nine timed in full with 10 ms, one sparsely
		// timed with 40 ms. Mean = (9*10 + 16*40) / 25 ms.
		start := a.now()
		a.engine.Lock()
		for range 18 {
			a.engine.TakeLocked()
		}
		a.engine.Unlock()
		time.Sleep(10 * time.Millisecond)
		for range 9 {
			AdaptivePermit{l: a, start: start, weight: 1}.Release(LimitSampled)
		}
		time.Sleep(30 * time.Millisecond)
		for range 8 {
			AdaptivePermit{l: a}.Release(LimitSampled) // untimed: count, no time
		}
		AdaptivePermit{l: a, start: start, weight: sparseEvery}.Release(LimitSampled)
		if len(rec.windows) != 1 {
			t.Fatalf("%d windows, want 1", len(rec.windows))
		}
		w := rec.windows[0]
		want := (9*10*time.Millisecond + sparseEvery*40*time.Millisecond) / (9 + sparseEvery)
		if w.RTT != want || w.MinRTT != 10*time.Millisecond || w.Samples != 18 {
			t.Fatalf("window %+v, want RTT %v, MinRTT 10ms, 18 samples", w, want)
		}
	})
}

// Invariant 2: a classifier that panics does not lose the permit.
func TestAdaptiveClassifierPanicReturnsThePermit(t *testing.T) {
	l, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{
		InitialLimit: 1,
		Classify:     func(context.Context, error) LimitOutcome { panic("classifier bug") },
	})
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != "classifier bug" {
				t.Fatalf("recovered %v", r)
			}
		}()
		_ = l.Execute(context.Background(), Telemetry{}, func(context.Context) error { return nil })
	}()
	if s := l.Stats(); s.InFlight != 0 {
		t.Fatalf("stats after the panic = %+v, want the permit back", s)
	}
}
