package resilience

import (
	"context"
	"testing"
	"time"
)

// recovered runs f and returns what it panicked with.
func recovered(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// The hooks that run for one execution alone (Priority, a rate limiter's
// Key) panic in that execution and nowhere else, and leave the limiter as
// it was: no permit or queue place is taken by the failed execution, and
// the next one is served normally.
func TestPerExecutionHookPanicStaysInItsExecution(t *testing.T) {
	t.Run("Priority", func(t *testing.T) {
		l, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{
			PermitLimit: 1, QueueLimit: 2,
			Priority: func(ctx context.Context) int {
				if ctx.Value(hookPanicKey{}) != nil {
					panic("priority bug")
				}
				return 0
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !l.TryAcquire() {
			t.Fatal("no free permit")
		}
		ctx := context.WithValue(context.Background(), hookPanicKey{}, true)
		if v := recovered(func() { _ = l.Acquire(ctx) }); v != "priority bug" {
			t.Fatalf("recovered %v, want the priority function's panic", v)
		}
		if s := l.Stats(); s.InFlight != 1 || s.Queued != 0 {
			t.Fatalf("stats %+v after the panic, want the held permit alone", s)
		}
		done := make(chan error, 1)
		go func() { done <- l.Acquire(context.Background()) }()
		for l.Stats().Queued != 1 {
			time.Sleep(time.Millisecond)
		}
		l.Release() // granted to the healthy waiter
		if err := <-done; err != nil {
			t.Fatalf("the next execution: %v", err)
		}
		l.Release()
		if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 {
			t.Fatalf("stats %+v, want idle", s)
		}
	})
	t.Run("Key", func(t *testing.T) {
		l, err := NewRateLimiter(RateLimiterOptions{
			PermitLimit: 1, Window: time.Hour,
			Key: func(ctx context.Context) string {
				if ctx.Value(hookPanicKey{}) != nil {
					panic("key bug")
				}
				return "k"
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.WithValue(context.Background(), hookPanicKey{}, true)
		if v := recovered(func() { _, _ = l.Allow(ctx) }); v != "key bug" {
			t.Fatalf("recovered %v, want the key function's panic", v)
		}
		d, err := l.Allow(context.Background())
		if err != nil || !d.Allowed {
			t.Fatalf("the next execution: %+v %v, want the permit the panic did not take", d, err)
		}
	})
}

type hookPanicKey struct{}
