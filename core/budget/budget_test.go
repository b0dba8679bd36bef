package budget

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/ylcnfrht/resilience/core/internal/config"
	"github.com/ylcnfrht/resilience/core/internal/window"
)

func newTestBudget(t interface{ Fatal(...any) }, opts Options) *Budget {
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// allowN asks for n retries and returns how many the budget allowed.
func allowN(b *Budget, n int) int {
	ok := 0
	for range n {
		if b.AllowRetry() {
			ok++
		}
	}
	return ok
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts  Options
		field string
	}{
		{Options{Ratio: -0.1}, "budget.Options.Ratio"},
		{Options{Window: -time.Second}, "budget.Options.Window"},
		{Options{Window: time.Millisecond}, "budget.Options.Window"},
	} {
		_, err := New(tc.opts)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: got %v, want a *ConfigError for %s", tc.opts, err, tc.field)
		}
	}
}

// The zero options are the documented defaults: 10 % of the first
// attempts of 10 s plus one retry a second.
func TestBudgetZeroOptionsAreTheDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTestBudget(t, Options{})
		if got := allowN(b, 100); got != 10 {
			t.Fatalf("with no first attempts the floor allows %d retries, want 10 (1/s over 10 s)", got)
		}
		for range 1000 {
			b.FirstAttempt()
		}
		if got := allowN(b, 1000); got != 100 {
			t.Fatalf("1000 first attempts pay for %d more retries, want 100", got)
		}
		if s := b.Stats(); s.FirstAttempts != 1000 || s.Retries != 110 || s.Available != 0 || s.Allowed != 110 || s.Denied != 990 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// The window slides: first attempts stop paying for retries a window
// after they were made, and retries stop counting against it.
func TestBudgetWindowSlides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTestBudget(t, Options{Ratio: 0.5, MinPerSecond: -1, Window: 10 * time.Second})
		for range 100 {
			b.FirstAttempt()
		}
		if got := allowN(b, 30); got != 30 {
			t.Fatalf("allowed %d of 30, want all", got)
		}
		time.Sleep(5 * time.Second)
		if got := allowN(b, 100); got != 20 {
			t.Fatalf("5 s later allowed %d, want the 20 left of 50", got)
		}
		// 9 s after the first attempts they still count (the window's
		// first nine slots); at 10 s they have left.
		time.Sleep(4 * time.Second)
		if s := b.Stats(); s.FirstAttempts != 100 {
			t.Fatalf("at 9 s the window holds %d first attempts, want 100", s.FirstAttempts)
		}
		time.Sleep(time.Second)
		if s := b.Stats(); s.FirstAttempts != 0 {
			t.Fatalf("at 10 s the window holds %d first attempts, want 0", s.FirstAttempts)
		}
		if got := allowN(b, 1); got != 0 {
			t.Fatalf("with no first attempts left and no floor, allowed %d", got)
		}
		// The retries made at 0 and 5 s leave too: new first attempts pay
		// in full once they have.
		time.Sleep(11 * time.Second)
		for range 10 {
			b.FirstAttempt()
		}
		if got := allowN(b, 10); got != 5 {
			t.Fatalf("after the window allowed %d, want 5", got)
		}
	})
}

// An idle budget that sleeps longer than its ring clears everything.
func TestBudgetLongIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTestBudget(t, Options{MinPerSecond: -1, Window: time.Second})
		for range 50 {
			b.FirstAttempt()
		}
		allowN(b, 5)
		time.Sleep(time.Hour)
		if s := b.Stats(); s.FirstAttempts != 0 || s.Retries != 0 {
			t.Fatalf("after an hour: %+v", s)
		}
	})
}

// budgetEvent is one step of the property's history.
type budgetEvent struct {
	at    time.Duration
	first bool // a first attempt; else a retry allowed
}

// TestBudgetNeverExceedsItsBudget is the budget's promise under any
// interleaving of first attempts, retries and time: at every retry it
// allows at time t, the retries it allowed in [t−Window, t] are at most
// Ratio × the first attempts in [t−Window, t] + MinPerSecond × Window.
// It also checks the budget is not useless: a retry asked with more than
// a window's share of first attempts in the last 0.9 × Window and no
// retries since is allowed.
func TestBudgetNeverExceedsItsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(inBubble{t}, func(t *rapid.T) {
			window := time.Duration(rapid.IntRange(1, 20).Draw(t, "windowSeconds")) * time.Second
			ratio := rapid.Float64Range(0.01, 2).Draw(t, "ratio")
			perSec := rapid.SampledFrom([]float64{-1, 0.5, 1, 3}).Draw(t, "minPerSecond")
			b := newTestBudget(t, Options{Ratio: ratio, MinPerSecond: perSec, Window: window})
			floor := max(perSec, 0) * window.Seconds()
			start := time.Now()
			var hist []budgetEvent
			count := func(now time.Duration, span time.Duration, first bool) int {
				n := 0
				for _, e := range hist {
					if e.first == first && e.at >= now-span && e.at <= now {
						n++
					}
				}
				return n
			}
			steps := rapid.IntRange(1, 300).Draw(t, "steps")
			for range steps {
				switch rapid.IntRange(0, 2).Draw(t, "op") {
				case 0:
					time.Sleep(time.Duration(rapid.Int64Range(0, int64(window)).Draw(t, "sleep")) / 4)
				case 1:
					b.FirstAttempt()
					hist = append(hist, budgetEvent{at: time.Since(start), first: true})
				case 2:
					now := time.Since(start)
					firstsInside := count(now, window*9/10-window/windowSlots, true)
					retriesAll := count(now, 2*window, false)
					if b.AllowRetry() {
						hist = append(hist, budgetEvent{at: now})
						retries, firsts := count(now, window, false), count(now, window, true)
						if float64(retries) > ratio*float64(firsts)+floor+1e-9 {
							t.Fatalf("at %v: %d retries in the last %v against %d first attempts (ratio %v, floor %v)",
								now, retries, window, firsts, ratio, floor)
						}
					} else if retriesAll == 0 && float64(1) <= ratio*float64(firstsInside) {
						t.Fatalf("at %v: denied the first retry in two windows with %d first attempts in the window (ratio %v)",
							now, firstsInside, ratio)
					}
				}
			}
		})
	})
}

// Many goroutines deciding at once never allow more than the budget, and
// the race detector sees the window's state guarded.
func TestBudgetConcurrent(t *testing.T) {
	b := newTestBudget(t, Options{Ratio: 0.1, MinPerSecond: -1, Window: time.Hour})
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 8 {
		wg.Go(func() {
			n := 0
			for range 1000 {
				b.FirstAttempt()
				if b.AllowRetry() {
					n++
				}
				b.Stats()
			}
			mu.Lock()
			allowed += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if allowed > 800 || allowed < 700 {
		t.Fatalf("allowed %d retries for 8000 first attempts at ratio 0.1, want at most 800 and not much fewer", allowed)
	}
}

// BenchmarkBudget measures the decisions beside a baseline of what
// any windowed decision costs at least (reading the monotonic clock and an
// uncontended mutex), so that a noisy machine can still report a ratio.
func BenchmarkBudget(b *testing.B) {
	budget, _ := New(Options{})
	b.Run("Baseline", func(b *testing.B) {
		var mu sync.Mutex
		start := time.Now()
		var sink time.Duration
		for b.Loop() {
			mu.Lock()
			sink += time.Since(start)
			mu.Unlock()
		}
		_ = sink
	})
	b.Run("FirstAttempt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			budget.FirstAttempt()
		}
	})
	b.Run("AllowRetry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			budget.AllowRetry()
		}
	})
	b.Run("AllowRetryParallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				budget.FirstAttempt()
				budget.AllowRetry()
			}
		})
	})
}

// inBubble hides that t is a *testing.T from rapid, which would otherwise
// ask for t.Deadline, a call synctest bubbles forbid.
type inBubble struct{ testing.TB }

// The decisions are on every call's path: they must not allocate.
func TestBudgetDecisionsDoNotAllocate(t *testing.T) {
	b := newTestBudget(t, Options{})
	if n := testing.AllocsPerRun(1000, func() { b.FirstAttempt(); b.AllowRetry() }); n != 0 {
		t.Errorf("%v allocations per decision", n)
	}
}

// windowSlots is the number of slots of a window.
const windowSlots = window.Slots
