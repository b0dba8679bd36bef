package inbound

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// budgetRun holds the one permit for hold, then runs a second request
// that queued meanwhile, and returns how long after its arrival that
// request's context ended, and Execute's error for it.
func budgetRun(t *testing.T, opts Options, hold time.Duration) (time.Duration, error) {
	t.Helper()
	m := mustNew(t, opts)
	var ended time.Duration
	var err error
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		go func() {
			_ = m.execute(context.Background(), nil, func(context.Context) error { <-release; return nil })
		}()
		synctest.Wait()
		arrived := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			err = m.execute(context.Background(), nil, func(ctx context.Context) error {
				<-ctx.Done()
				ended = time.Since(arrived)
				return ctx.Err()
			})
		}()
		time.Sleep(hold)
		close(release)
		<-done
	})
	return ended, err
}

// The default budget counts from arrival: a request that waited 4 s of a
// 5 s Timeout has 1 s left, so its deadline is 5 s after it arrived.
func TestTimeoutFromArrivalIncludesQueueWait(t *testing.T) {
	opts := Options{Timeout: 5 * time.Second, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: 5 * time.Second}}
	ended, err := budgetRun(t, opts, 4*time.Second)
	if ended != 5*time.Second || !errors.Is(err, resilience.ErrTimeoutRejected) {
		t.Fatalf("context ended %v after arrival with %v, want 5s and the timeout", ended, err)
	}
}

// Counted from admission, the same request gets the full Timeout after
// its wait: its deadline is QueueWait + Timeout after arrival.
func TestTimeoutFromAdmissionAddsQueueWait(t *testing.T) {
	opts := Options{Timeout: 5 * time.Second, TimeoutFrom: TimeoutFromAdmission,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: 5 * time.Second}}
	ended, err := budgetRun(t, opts, 4*time.Second)
	if ended != 9*time.Second || !errors.Is(err, resilience.ErrTimeoutRejected) {
		t.Fatalf("context ended %v after arrival with %v, want 9s and the timeout", ended, err)
	}
}

// A request admitted at once gets the whole Timeout either way.
func TestTimeoutFromArrivalFastPath(t *testing.T) {
	m := mustNew(t, Options{Timeout: 5 * time.Second, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		_ = m.execute(context.Background(), nil, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("context ended after %v, want 5s", d)
		}
	})
}

// With the budget counted from arrival, a queue wait without limit is
// bounded by Timeout: the waiter is refused with queue-timeout then.
func TestTimeoutFromArrivalBoundsUnlimitedQueueWait(t *testing.T) {
	m := mustNew(t, Options{Timeout: 5 * time.Second, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1}})
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		go func() {
			_ = m.execute(context.Background(), nil, func(context.Context) error { <-release; return nil })
		}()
		synctest.Wait()
		start := time.Now()
		err := m.execute(context.Background(), nil, func(context.Context) error { return nil })
		var rej *resilience.ConcurrencyLimitRejectedError
		if !errors.As(err, &rej) || rej.Reason != resilience.ReasonQueueTimeout || time.Since(start) != 5*time.Second {
			t.Errorf("queued request: %v after %v, want queue-timeout after 5s", err, time.Since(start))
		}
		close(release)
	})
}

// A queue timeout longer than a budget counted from arrival is bounded
// by it: the waiter is refused at Timeout with reason queue-timeout.
// Counted from admission the queue timeout stands, and the caller's
// options are never changed.
func TestQueueTimeoutBoundedByArrivalBudget(t *testing.T) {
	c := &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: 8 * time.Second}
	for _, tc := range []struct {
		from TimeoutStart
		want time.Duration
	}{{TimeoutFromArrival, 5 * time.Second}, {TimeoutFromAdmission, 8 * time.Second}} {
		m := mustNew(t, Options{Timeout: 5 * time.Second, TimeoutFrom: tc.from, Concurrency: c})
		synctest.Test(t, func(t *testing.T) {
			release := make(chan struct{})
			go func() {
				_ = m.execute(context.Background(), nil, func(context.Context) error { <-release; return nil })
			}()
			synctest.Wait()
			start := time.Now()
			err := m.execute(context.Background(), nil, func(context.Context) error { return nil })
			var rej *resilience.ConcurrencyLimitRejectedError
			if !errors.As(err, &rej) || rej.Reason != resilience.ReasonQueueTimeout || time.Since(start) != tc.want {
				t.Errorf("%s: queued request %v after %v, want queue-timeout after %v", tc.from, err, time.Since(start), tc.want)
			}
			close(release)
		})
	}
	if c.QueueTimeout != 8*time.Second {
		t.Fatalf("New changed the caller's options: %+v", c)
	}
	var ce *resilience.ConfigError
	if _, err := New(Options{TimeoutFrom: "sometime"}); !errors.As(err, &ce) || ce.Field != "Options.TimeoutFrom" {
		t.Fatalf("New = %v, want a *ConfigError for Options.TimeoutFrom", err)
	}
}
