package resilience

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Close answers the queue: every waiter is rejected at once with
// ReasonShuttingDown, so is every later arrival (fast path included),
// and running executions keep their permits until they release them.
func TestLimiterCloseRejectsQueueAndNewcomers(t *testing.T) {
	type limiter struct {
		acquire func(context.Context) (release func(), err error)
		try     func() bool
		close   func()
		stats   func() LimiterStats
	}
	fixed := func(t *testing.T) limiter {
		l, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{PermitLimit: 2, QueueLimit: 4})
		if err != nil {
			t.Fatal(err)
		}
		return limiter{
			acquire: func(ctx context.Context) (func(), error) { p, err := l.Acquire(ctx); return p.Release, err },
			try: func() bool {
				_, ok := l.TryAcquire()
				if ok {
					l.Release()
				}
				return ok
			},
			close: l.Close, stats: l.Stats,
		}
	}
	adaptive := func(t *testing.T) limiter {
		l, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{InitialLimit: 2, MaxLimit: 2, QueueLimit: 4})
		if err != nil {
			t.Fatal(err)
		}
		return limiter{
			acquire: func(ctx context.Context) (func(), error) {
				p, err := l.Acquire(ctx)
				return func() { p.Release(LimitIgnored) }, err
			},
			try: func() bool {
				p, ok := l.TryAcquire()
				if ok {
					p.Release(LimitIgnored)
				}
				return ok
			},
			close: l.Close, stats: l.Stats,
		}
	}
	for name, mk := range map[string]func(*testing.T) limiter{"fixed": fixed, "adaptive": adaptive} {
		t.Run(name, func(t *testing.T) {
			l := mk(t)
			ctx := context.Background()
			var running []func()
			for i := 0; i < 2; i++ {
				rel, err := l.acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				running = append(running, rel)
			}
			errs := make(chan error, 3)
			for i := 0; i < 3; i++ {
				go func() { _, err := l.acquire(ctx); errs <- err }()
			}
			for deadline := time.Now().Add(10 * time.Second); l.stats().Queued != 3; {
				if time.Now().After(deadline) {
					t.Fatalf("waiters never queued: %+v", l.stats())
				}
				time.Sleep(time.Millisecond)
			}
			l.close()
			for i := 0; i < 3; i++ {
				var b *ConcurrencyLimitRejectedError
				if err := <-errs; !errors.As(err, &b) || b.Reason != ReasonShuttingDown {
					t.Fatalf("queued waiter got %v, want ReasonShuttingDown", err)
				}
			}
			if s := l.stats(); s.InFlight != 2 || s.Queued != 0 {
				t.Fatalf("after Close: %+v, want the two running permits and an empty queue", s)
			}
			running[0]() // a permit freed after Close admits nobody
			var b *ConcurrencyLimitRejectedError
			if _, err := l.acquire(ctx); !errors.As(err, &b) || b.Reason != ReasonShuttingDown {
				t.Fatalf("newcomer got %v, want ReasonShuttingDown", err)
			}
			if l.try() {
				t.Fatal("TryAcquire admitted after Close")
			}
			running[1]()
			l.close() // twice is harmless
			if s := l.stats(); s.InFlight != 0 || s.Queued != 0 {
				t.Fatalf("after the running executions ended: %+v, want idle", s)
			}
		})
	}
}
