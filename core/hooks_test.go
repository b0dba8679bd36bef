package resilience

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
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
		if _, ok := l.TryAcquire(); !ok {
			t.Fatal("no free permit")
		}
		ctx := context.WithValue(context.Background(), hookPanicKey{}, true)
		if v := recovered(func() { _, _ = l.Acquire(ctx) }); v != "priority bug" {
			t.Fatalf("recovered %v, want the priority function's panic", v)
		}
		if s := l.Stats(); s.InFlight != 1 || s.Queued != 0 {
			t.Fatalf("stats %+v after the panic, want the held permit alone", s)
		}
		done := make(chan error, 1)
		go func() { done <- acquireErr(l, context.Background()) }()
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

// Run through Execute, which has a Telemetry, each per-execution hook's
// panic is reported as event.HookPanic naming the hook, once, and still
// reaches the execution's caller with its own value; the limiter is left
// as it was.
func TestPerExecutionHookPanicIsReported(t *testing.T) {
	boom := func(hook string) string { return hook + " bug" }
	var events []event.Event
	tel := NewTelemetry("p", "s", event.ListenerFunc(func(_ context.Context, e event.Event) {
		if e.Name == event.HookPanic {
			events = append(events, e)
		}
	}))
	ok := func(context.Context) error { return nil }
	check := func(t *testing.T, hook string, run func()) {
		t.Helper()
		events = nil
		if v := recovered(run); v != boom(hook) {
			t.Fatalf("recovered %v, want the %s's own panic value", v, hook)
		}
		var hp *HookPanicError
		if len(events) != 1 || events[0].Reason != hook || !errors.As(events[0].Err, &hp) || hp.Hook != hook || hp.Value != boom(hook) {
			t.Fatalf("events %+v, want one %s for %s", events, event.HookPanic, hook)
		}
	}
	t.Run("Priority", func(t *testing.T) {
		l, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1,
			Priority: func(context.Context) int { panic(boom(event.HookPriority)) }})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := l.TryAcquire(); !ok {
			t.Fatal("no free permit")
		}
		check(t, event.HookPriority, func() { _ = l.Execute(context.Background(), tel, ok) })
		if s := l.Stats(); s.InFlight != 1 || s.Queued != 0 {
			t.Fatalf("stats %+v, want the held permit alone", s)
		}
	})
	t.Run("Priority, adaptive", func(t *testing.T) {
		l, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, QueueLimit: 1,
			Priority: func(context.Context) int { panic(boom(event.HookPriority)) }})
		if err != nil {
			t.Fatal(err)
		}
		p, held := l.TryAcquire()
		if !held {
			t.Fatal("no free permit")
		}
		check(t, event.HookPriority, func() { _ = l.Execute(context.Background(), tel, ok) })
		if s := l.Stats(); s.InFlight != 1 || s.Queued != 0 {
			t.Fatalf("stats %+v, want the held permit alone", s)
		}
		_ = p.Release(LimitIgnored)
	})
	t.Run("Key", func(t *testing.T) {
		l, err := NewRateLimiter(RateLimiterOptions{PermitLimit: 1, Window: time.Hour,
			Key: func(context.Context) string { panic(boom(event.HookKey)) }})
		if err != nil {
			t.Fatal(err)
		}
		check(t, event.HookKey, func() { _ = l.Execute(context.Background(), tel, ok) })
	})
	t.Run("Classifier", func(t *testing.T) {
		l, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{InitialLimit: 1, MinLimit: 1, MaxLimit: 1,
			Classify: func(context.Context, error) LimitOutcome { panic(boom(event.HookClassifier)) }})
		if err != nil {
			t.Fatal(err)
		}
		check(t, event.HookClassifier, func() { _ = l.Execute(context.Background(), tel, ok) })
		if s := l.Stats(); s.InFlight != 0 {
			t.Fatalf("stats %+v, want the permit back", s)
		}
	})
}
