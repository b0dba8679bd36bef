package throttle

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/internal/window"
)

func newTestThrottle(t interface{ Fatal(...any) }, opts Options[int]) *Throttle[int] {
	th, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts  Options[int]
		field string
	}{
		{Options[int]{K: 0.5}, "throttle.Options.K"},
		{Options[int]{K: math.NaN()}, "throttle.Options.K"},
		{Options[int]{Window: -time.Second}, "throttle.Options.Window"},
		{Options[int]{Window: time.Millisecond}, "throttle.Options.Window"},
	} {
		_, err := New(tc.opts)
		var ce *resilience.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: got %v, want a *ConfigError for %s", tc.opts, err, tc.field)
		}
	}
}

// The rejection probability is the SRE formula over the window: with
// requests R and accepts A it is max(0, (R − K·A)/(R+1)), drawn against
// the throttle's random number.
func TestThrottleProbability(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := newTestThrottle(t, Options[int]{MinPerSecond: -1})
		th.random = func() float64 { return 1 } // above any p < 1
		// 100 requests, 20 accepted: p = (100 − 40)/101.
		for i := range 100 {
			if !th.Allow() {
				t.Fatalf("request %d rejected with a draw of 1", i)
			}
			th.Record(i < 20)
		}
		want := 60.0 / 101
		if s := th.Stats(); s.Requests != 100 || s.Accepts != 20 || s.Sent != 100 || math.Abs(s.Probability-want) > 1e-12 {
			t.Fatalf("stats %+v, want probability %v", s, want)
		}
		// A draw just above p lets the request through, one just below
		// rejects it; each counts as a request either way.
		th.random = func() float64 { return want + 1e-9 }
		if !th.Allow() {
			t.Fatal("a draw above p was rejected")
		}
		th.Record(true) // R 101, A 21: p = 59/102
		th.random = func() float64 { return 59.0/102 - 1e-9 }
		if th.Allow() {
			t.Fatal("a draw below p was let through")
		}
		if s := th.Stats(); s.Requests != 102 || s.Sent != 101 || s.Throttled != 1 {
			t.Fatalf("stats %+v", s)
		}
		// A window later everything has left: p is 0 again.
		time.Sleep(DefaultWindow)
		if s := th.Stats(); s.Requests != 0 || s.Probability != 0 {
			t.Fatalf("after the window: %+v", s)
		}
	})
}

// MinPerSecond lets requests through even when p is 1, so that a
// recovery is seen.
func TestThrottleFloorLetsRequestsThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := newTestThrottle(t, Options[int]{MinPerSecond: 2, Window: time.Second})
		th.random = func() float64 { return 0 } // reject whenever p > 0
		sent := 0
		for range 1000 {
			if th.Allow() {
				sent++
				th.Record(false)
			}
		}
		if sent != 2 { // the floor's two a second, the first (p = 0) included
			t.Fatalf("sent %d of 1000 refused requests in a second, want 2", sent)
		}
		time.Sleep(2 * time.Second)
		if !th.Allow() {
			t.Fatal("a request after the window was rejected")
		}
	})
}

// TestThrottleNeverRejectsWhileAcceptsKeepUp checks the throttle
// against a model of its window under any sequence of requests, outcomes
// and time: while the requests of the window are at most K × its accepts
// (the dependency accepts at least 1/K of what it is sent), the rejection
// probability is 0 and nothing is rejected; past that, with a draw of 0,
// every request is rejected (the probability is above 0).
func TestThrottleNeverRejectsWhileAcceptsKeepUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(inBubble{t}, func(t *rapid.T) {
			k := rapid.Float64Range(1, 4).Draw(t, "k")
			window := time.Duration(rapid.IntRange(1, 5).Draw(t, "windowSeconds")) * time.Second
			th := newTestThrottle(t, Options[int]{K: k, MinPerSecond: -1, Window: window})
			th.random = func() float64 { return 0 }
			start := time.Now()
			slot := window / windowSlots
			type req struct {
				at       time.Duration
				accepted bool
			}
			var hist []req
			acceptShare := rapid.Float64Range(0.2, 1).Draw(t, "acceptShare")
			for range rapid.IntRange(1, 400).Draw(t, "steps") {
				if rapid.IntRange(0, 9).Draw(t, "op") == 0 {
					time.Sleep(time.Duration(rapid.Int64Range(0, int64(window)).Draw(t, "sleep")) / 3)
					continue
				}
				now := time.Since(start)
				from := (now/slot - (windowSlots - 1)) * slot
				var r, a int
				for _, e := range hist {
					if e.at >= from {
						r++
						if e.accepted {
							a++
						}
					}
				}
				keepUp := float64(r) <= k*float64(a)
				if p := th.Stats().Probability; keepUp != (p == 0) {
					t.Fatalf("at %v: window holds %d requests, %d accepted (K %v), but p = %v", now, r, a, k, p)
				}
				allowed := th.Allow()
				if allowed != keepUp {
					t.Fatalf("at %v: allowed %v with %d requests, %d accepted in the window (K %v)", now, allowed, r, a, k)
				}
				e := req{at: now}
				if allowed {
					e.accepted = rapid.Float64Range(0, 1).Draw(t, "draw") < acceptShare
					th.Record(e.accepted)
				}
				hist = append(hist, e)
			}
		})
	})
}

// The strategy counts each outcome through IsRejected and answers a
// local rejection with the shared *ThrottledError and event.Throttled,
// without calling the rest of the pipeline.
func TestThrottleStrategy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		th := newTestThrottle(t, Options[int]{MinPerSecond: -1, IsRejected: func(o resilience.Outcome[int]) bool { return o.Value == 503 }})
		p := buildResult(t, rec, th)
		th.random = func() float64 { return 1 }
		calls := 0
		for range 10 {
			p.Execute(context.Background(), func(context.Context) (int, error) { calls++; return 503, nil })
		}
		th.random = func() float64 { return 0.5 } // p = 10/11 > 0.5 now
		v, err := p.Execute(context.Background(), func(context.Context) (int, error) { calls++; return 200, nil })
		var te *ThrottledError
		if v != 0 || !errors.As(err, &te) || !errors.Is(err, ErrThrottled) || !errors.Is(err, resilience.ErrRejected) || calls != 10 {
			t.Fatalf("got %d, %v after %d calls; want a local rejection", v, err, calls)
		}
		if ev := rec.named(event.Throttled); len(ev) != 1 || ev[0].Strategy != "AdaptiveThrottle" || ev[0].Err != err {
			t.Fatalf("Throttled events %+v", ev)
		}
		// The default IsRejected: errors refuse, but not a cancellation or
		// a throttle's own rejection further in.
		for _, tc := range []struct {
			err  error
			want bool
		}{{errDependency, true}, {context.Canceled, false}, {throttledErr, false}, {nil, false}} {
			if got := refusedByDefault(resilience.Outcome[int]{Err: tc.err}); got != tc.want {
				t.Errorf("refusedByDefault(%v) = %v", tc.err, got)
			}
		}
	})
}

func TestThrottleConcurrent(t *testing.T) {
	th := newTestThrottle(t, Options[int]{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				if th.Allow() {
					th.Record((i+g)%3 != 0)
				}
				th.Stats()
			}
		})
	}
	wg.Wait()
	if s := th.Stats(); s.Requests != 8000 || s.Probability != 0 || s.Throttled != 0 {
		t.Fatalf("two thirds accepted with K 2 must never throttle: %+v", s)
	}
}

func BenchmarkThrottle(b *testing.B) {
	th, _ := New(Options[int]{})
	b.Run("AllowRecord", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if th.Allow() {
				th.Record(i%4 != 0)
			}
			i++
		}
	})
	b.Run("AllowRecordParallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if th.Allow() {
					th.Record(i%4 != 0)
				}
				i++
			}
		})
	})
}

// Requests in flight count neither as requests nor as accepts: a burst
// sent before any answer arrives is not mistaken for refusals.
func TestThrottleIgnoresRequestsInFlight(t *testing.T) {
	th := newTestThrottle(t, Options[int]{MinPerSecond: -1})
	th.random = func() float64 { return 0 }
	for i := range 500 {
		if !th.Allow() {
			t.Fatalf("request %d of a burst with no answer yet was rejected", i)
		}
	}
	for range 500 {
		th.Record(true)
	}
	if s := th.Stats(); s.Requests != 500 || s.Accepts != 500 || s.Sent != 500 || s.Probability != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// The decisions are on every call's path: they must not allocate, a
// local rejection included.
func TestThrottleDecisionsDoNotAllocate(t *testing.T) {
	th := newTestThrottle(t, Options[int]{})
	refusing := newTestThrottle(t, Options[int]{MinPerSecond: -1})
	refusing.random = func() float64 { return 0 }
	for range 100 {
		refusing.Allow()
		refusing.Record(false)
	}
	for name, f := range map[string]func(){
		"throttle":           func() { th.Record(th.Allow()) },
		"throttle rejection": func() { refusing.Allow() },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per decision", name, n)
		}
	}
	if refusing.Stats().Throttled < 1000 {
		t.Errorf("the refusing throttle let requests through: %+v", refusing.Stats())
	}
}

var errDependency = errors.New("dependency failed")

func buildResult[T any](t *testing.T, l event.Listener, s resilience.ResultStrategy[T]) *resilience.Pipeline[T] {
	t.Helper()
	p, err := resilience.NewBuilder[T](resilience.WithName("p"), resilience.WithListener(l)).AddResultStrategy(s).Build()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// recorder keeps the events a pipeline emits.
type recorder struct{ events []event.Event }

func (r *recorder) OnEvent(_ context.Context, e event.Event) { r.events = append(r.events, e) }

func (r *recorder) named(n event.Name) []event.Event {
	var out []event.Event
	for _, e := range r.events {
		if e.Name == n {
			out = append(out, e)
		}
	}
	return out
}

// inBubble hides that t is a *testing.T from rapid, which would otherwise
// ask for t.Deadline, a call synctest bubbles forbid.
type inBubble struct{ testing.TB }

// windowSlots is the number of slots of a window.
const windowSlots = window.Slots

// A Throttle is a pipeline strategy that names itself.
var (
	_ resilience.ResultStrategy[int] = (*Throttle[int])(nil)
	_ resilience.Named               = (*Throttle[int])(nil)
)
