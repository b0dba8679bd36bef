package resilience

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/ylcnfrht/resilience/core/event"
)

func newTestBudget(t interface{ Fatal(...any) }, opts RetryBudgetOptions) *RetryBudget {
	b, err := NewRetryBudget(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// allowN asks for n retries and returns how many the budget allowed.
func allowN(b *RetryBudget, n int) int {
	ok := 0
	for range n {
		if b.AllowRetry() {
			ok++
		}
	}
	return ok
}

func TestRetryBudgetOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts  RetryBudgetOptions
		field string
	}{
		{RetryBudgetOptions{Ratio: -0.1}, "RetryBudgetOptions.Ratio"},
		{RetryBudgetOptions{Window: -time.Second}, "RetryBudgetOptions.Window"},
		{RetryBudgetOptions{Window: time.Millisecond}, "RetryBudgetOptions.Window"},
	} {
		_, err := NewRetryBudget(tc.opts)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: got %v, want a *ConfigError for %s", tc.opts, err, tc.field)
		}
	}
}

// The zero options are the documented defaults: 10 % of the first
// attempts of 10 s plus one retry a second.
func TestRetryBudgetZeroOptionsAreTheDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTestBudget(t, RetryBudgetOptions{})
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
func TestRetryBudgetWindowSlides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTestBudget(t, RetryBudgetOptions{Ratio: 0.5, MinPerSecond: -1, Window: 10 * time.Second})
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
func TestRetryBudgetLongIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTestBudget(t, RetryBudgetOptions{MinPerSecond: -1, Window: time.Second})
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

// TestRetryBudgetNeverExceedsItsBudget is the budget's promise under any
// interleaving of first attempts, retries and time: at every retry it
// allows at time t, the retries it allowed in [t−Window, t] are at most
// Ratio × the first attempts in [t−Window, t] + MinPerSecond × Window.
// It also checks the budget is not useless: a retry asked with more than
// a window's share of first attempts in the last 0.9 × Window and no
// retries since is allowed.
func TestRetryBudgetNeverExceedsItsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(inBubble{t}, func(t *rapid.T) {
			window := time.Duration(rapid.IntRange(1, 20).Draw(t, "windowSeconds")) * time.Second
			ratio := rapid.Float64Range(0.01, 2).Draw(t, "ratio")
			perSec := rapid.SampledFrom([]float64{-1, 0.5, 1, 3}).Draw(t, "minPerSecond")
			b := newTestBudget(t, RetryBudgetOptions{Ratio: ratio, MinPerSecond: perSec, Window: window})
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

// Retry draws on its budget: each execution records its first attempt, a
// denied retry ends the execution with the last outcome and emits
// RetryBudgetExceeded, and two strategies share one budget.
func TestRetryStopsWhenTheBudgetIsSpent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget := newTestBudget(t, RetryBudgetOptions{Ratio: 0.5, MinPerSecond: -1})
		rec := &recorder{}
		opts := RetryOptions[int]{MaxRetryAttempts: 3, Budget: budget}
		p1 := buildResult(t, rec, newRetry(opts))
		p2 := buildResult(t, rec, newRetry(opts))
		calls := 0
		fail := func(context.Context) (int, error) { calls++; return calls, errDependency }
		// First execution: one first attempt pays for 0.5 retry: none.
		v, err := p1.Execute(context.Background(), fail)
		if v != 1 || !errors.Is(err, errDependency) || calls != 1 {
			t.Fatalf("got %d, %v after %d calls; want the first attempt's outcome after 1 call", v, err, calls)
		}
		// Second, through the other pipeline: two first attempts pay for
		// one retry.
		v, err = p2.Execute(context.Background(), fail)
		if v != 3 || calls != 3 || !errors.Is(err, errDependency) {
			t.Fatalf("got %d, %v after %d calls; want the retry's outcome after 3 calls", v, err, calls)
		}
		ex := rec.named(event.RetryBudgetExceeded)
		if len(ex) != 2 || ex[0].Attempt != 1 || ex[1].Attempt != 2 || !errors.Is(ex[1].Err, errDependency) {
			t.Fatalf("RetryBudgetExceeded events %+v", ex)
		}
		if s := budget.Stats(); s.FirstAttempts != 2 || s.Retries != 1 || s.Denied != 2 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// Hedging draws on the same budget: a denied hedge is not launched and
// the first attempt's outcome is returned.
func TestHedgingStopsWhenTheBudgetIsSpent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget := newTestBudget(t, RetryBudgetOptions{Ratio: 0.5, MinPerSecond: -1})
		rec := &recorder{}
		p := buildResult(t, rec, newHedging(HedgingOptions[int]{MaxHedgedAttempts: 2, Delay: time.Second, Budget: budget}))
		var mu sync.Mutex
		calls := 0
		slow := func(ctx context.Context) (int, error) {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			select {
			case <-time.After(3 * time.Second):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			return n, nil
		}
		if v, err := p.Execute(context.Background(), slow); v != 1 || err != nil || calls != 1 {
			t.Fatalf("got %d, %v after %d calls; want the first attempt alone", v, err, calls)
		}
		if ex := rec.named(event.RetryBudgetExceeded); len(ex) != 1 || ex[0].Attempt != 1 {
			t.Fatalf("RetryBudgetExceeded events %+v", ex)
		}
		// A second execution has two first attempts behind it: one hedge.
		calls = 0
		if _, err := p.Execute(context.Background(), slow); err != nil || calls != 2 {
			t.Fatalf("%v after %d calls; want one hedge", err, calls)
		}
	})
}

// Many goroutines deciding at once never allow more than the budget, and
// the race detector sees the window's state guarded.
func TestRetryBudgetConcurrent(t *testing.T) {
	b := newTestBudget(t, RetryBudgetOptions{Ratio: 0.1, MinPerSecond: -1, Window: time.Hour})
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

// BenchmarkRetryBudget measures the decisions beside a baseline of what
// any windowed decision costs at least (reading the monotonic clock and an
// uncontended mutex), so that a noisy machine can still report a ratio.
func BenchmarkRetryBudget(b *testing.B) {
	budget, _ := NewRetryBudget(RetryBudgetOptions{})
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
