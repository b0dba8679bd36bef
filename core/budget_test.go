package resilience

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/budget"
	"github.com/ylcnfrht/resilience/core/event"
)

func newTestBudget(t interface{ Fatal(...any) }, opts budget.Options) *budget.Budget {
	b, err := budget.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Retry draws on its budget: each execution records its first attempt, a
// denied retry ends the execution with the last outcome and emits
// RetryBudgetExceeded, and two strategies share one budget.
func TestRetryStopsWhenTheBudgetIsSpent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTestBudget(t, budget.Options{Ratio: 0.5, MinPerSecond: -1})
		rec := &recorder{}
		opts := RetryOptions[int]{MaxRetryAttempts: 3, Budget: b}
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
		if s := b.Stats(); s.FirstAttempts != 2 || s.Retries != 1 || s.Denied != 2 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// Hedging draws on the same budget: a denied hedge is not launched and
// the first attempt's outcome is returned.
func TestHedgingStopsWhenTheBudgetIsSpent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTestBudget(t, budget.Options{Ratio: 0.5, MinPerSecond: -1})
		rec := &recorder{}
		p := buildResult(t, rec, newHedging(HedgingOptions[int]{MaxHedgedAttempts: 2, Delay: time.Second, Budget: b}))
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
