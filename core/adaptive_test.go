package resilience

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
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
		{AdaptiveLimiterOptions{Algorithm: &Gradient2{opts: Gradient2Options{Tolerance: 0.5}}}, "Gradient2Options.Tolerance"},
	}
	for _, c := range cases {
		_, err := NewAdaptiveLimiter(c.opts)
		wantConfigField(t, err, c.field)
		_, err = NewBuilder[int]().AddAdaptiveLimiter(c.opts).Build()
		wantConfigField(t, err, c.field)
	}
	var zero AdaptiveLimiter
	if zero.Validate() == nil {
		t.Fatal("zero AdaptiveLimiter validated")
	}
}

func TestLimitAlgorithmOptionsValidation(t *testing.T) {
	_, err := NewGradient2(Gradient2Options{Smoothing: 2})
	wantConfigField(t, err, "Gradient2Options.Smoothing")
	_, err = NewGradient2(Gradient2Options{DropBackoff: 1})
	wantConfigField(t, err, "Gradient2Options.DropBackoff")
	_, err = NewGradient2(Gradient2Options{BaselineWindows: -1})
	wantConfigField(t, err, "Gradient2Options.BaselineWindows")
	_, err = NewVegas(VegasOptions{Alpha: 10, Beta: 5})
	wantConfigField(t, err, "VegasOptions.Alpha")
	_, err = NewVegas(VegasOptions{Threshold: -1})
	wantConfigField(t, err, "VegasOptions.Threshold")
	_, err = NewAIMD(AIMDOptions{BackoffRatio: 1.5})
	wantConfigField(t, err, "AIMDOptions.BackoffRatio")
	_, err = NewAIMD(AIMDOptions{Timeout: -1})
	wantConfigField(t, err, "AIMDOptions.Timeout")
}

// Option validation never panics and either accepts the options or names
// a field.
func FuzzAdaptiveLimiterOptions(f *testing.F) {
	f.Add(0, 0, 0, 0, int64(0), 0.0, 0.0)
	f.Add(20, 1, 1000, 10, int64(time.Second), 1.5, 0.2)
	f.Add(-1, 5, 2, -3, int64(-1), 0.5, 3.0)
	f.Fuzz(func(t *testing.T, initial, minL, maxL, queue int, qt int64, tol, smooth float64) {
		_, gerr := NewGradient2(Gradient2Options{Tolerance: tol, Smoothing: smooth})
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
	if a.minLimit != 1 || a.maxLimit != 1000 || a.StrategyName() != "AdaptiveLimiter" {
		t.Fatalf("defaults: min %d max %d name %q", a.minLimit, a.maxLimit, a.StrategyName())
	}
	if _, ok := a.alg.(*Gradient2); !ok {
		t.Fatalf("default algorithm %T", a.alg)
	}
	var lp LimitProvider = a
	_ = lp
}

func TestDefaultClassify(t *testing.T) {
	bg := context.Background()
	dl, cancel := context.WithDeadline(bg, time.Unix(0, 0))
	defer cancel()
	cc, cancel2 := context.WithCancel(bg)
	cancel2()
	other := errors.New("boom")
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want LimitOutcome
	}{
		{"success", bg, nil, LimitSampled},
		{"error", bg, other, LimitSampled},
		{"own deadline", dl, context.DeadlineExceeded, LimitDropped},
		{"inner timeout strategy", bg, &TimeoutRejectedError{Timeout: time.Second}, LimitDropped},
		{"inner deadline", bg, context.DeadlineExceeded, LimitDropped},
		{"caller cancelled", cc, context.Canceled, LimitIgnored},
		{"inner rejection", bg, errBulkheadFull, LimitIgnored},
	} {
		if got := DefaultClassify(c.ctx, c.err); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if LimitOutcome(9).String() != "LimitOutcome(9)" || LimitDropped.String() != "drop" {
		t.Error("LimitOutcome.String")
	}
}

// Netflix concurrency-limits #176: a window with drops lowers the limit in
// every built-in algorithm (drops are used, not ignored).
func TestLimitAlgorithmsUseDrops(t *testing.T) {
	for _, a := range simAlgorithms() {
		alg := a.new()
		s := LimitSample{Limit: 100, MinLimit: 1, MaxLimit: 1000, RTT: 10 * time.Millisecond, InFlight: 100, Samples: 50}
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

// Invariant 2: a panic in the callback returns the permit (without a
// sample) and propagates; a rejection emits the bulkhead event.
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
	if ev := rec.snapshot(); len(ev) != 1 || ev[0].Name != EventRateLimiterRejected || ev[0].Reason != "full" {
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

func (f fixedAlg) Update(LimitSample) float64 { return float64(f) }

// A user algorithm that panics or answers NaN leaves the limiter working.
func TestAdaptiveLimiterSurvivesBadAlgorithm(t *testing.T) {
	a := newTestAdaptive(t, AdaptiveLimiterOptions{Algorithm: fixedAlg(nan()), InitialLimit: 1})
	p, _ := a.TryAcquire()
	p.Release(LimitSampled)
	if s := a.Stats(); s.Limit != 1 {
		t.Fatalf("NaN changed the limit: %+v", s)
	}
	b := newTestAdaptive(t, AdaptiveLimiterOptions{Algorithm: panicAlg{}, InitialLimit: 1})
	p, _ = b.TryAcquire()
	func() {
		defer func() { _ = recover() }()
		p.Release(LimitSampled)
	}()
	if b.updating || b.Stats().InFlight != 0 {
		t.Fatalf("stuck after a panicking algorithm: %+v", b.Stats())
	}
}

type panicAlg struct{}

func (panicAlg) Update(LimitSample) float64 { panic("algorithm bug") }

func nan() float64 { var z float64; return z / z }
