package resilience

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// abandonLoad offers 200 executions a second for d; each takes work
// unless its caller leaves after leave (0: never), as a client with a
// timeout does. It returns the limit at the end.
func abandonLoad(lim *AdaptiveLimiter, d, work, leave time.Duration) int {
	var wg sync.WaitGroup
	for el := time.Duration(0); el < d; el += 5 * time.Millisecond {
		ctx, cancel := context.WithCancel(context.Background())
		if leave > 0 {
			time.AfterFunc(leave, cancel)
		}
		wg.Go(func() {
			defer cancel()
			_ = lim.Execute(ctx, Telemetry{}, func(ctx context.Context) error {
				select {
				case <-time.After(work):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		})
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	return lim.Stats().Limit
}

// Invariant: callers who leave early (before twice the latency the limiter
// has learnt) say nothing about capacity, so the limit holds however many
// there are; callers who leave after waiting far longer than that are
// overload, so the limit falls even when no execution ever finishes for a
// waiting caller (the CPU-bound collapse, where every client times out).
func TestAdaptiveAbandonedLateIsOverloadEarlyIsNot(t *testing.T) {
	for _, a := range simAlgorithms() {
		t.Run(a.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{Algorithm: a.new(), InitialLimit: 50, MinLimit: 2})
				if err != nil {
					t.Fatal(err)
				}
				// 200/s × 100 ms: 20 in flight, well under the limit.
				learnt := abandonLoad(lim, 5*time.Second, 100*time.Millisecond, 0)
				early := abandonLoad(lim, 10*time.Second, 100*time.Millisecond, 50*time.Millisecond)
				if early < learnt {
					t.Fatalf("limit fell from %d to %d for callers that left after 50 ms of a 100 ms service", learnt, early)
				}
				late := abandonLoad(lim, 10*time.Second, 5*time.Second, time.Second)
				if late > learnt/2 {
					t.Fatalf("limit %d after 10 s of callers leaving after 1 s (learnt latency 100 ms), want at most %d", late, learnt/2)
				}
			})
		})
	}
}

// A window's abandoned executions reach the algorithm as drops only when
// they outlasted twice the baseline, and a sparsely timed one weighs as
// many drops as the executions it stands for.
func TestAdaptiveAbandonedCountsAsDropsPastBaseline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &windowRecorder{Algorithm: &countingAlg{}}
		lim, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{Algorithm: rec, InitialLimit: 1, MaxLimit: 1})
		if err != nil {
			t.Fatal(err)
		}
		run := func(d time.Duration, o LimitOutcome) {
			p, err := lim.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(d)
			p.Release(o)
		}
		run(10*time.Millisecond, LimitAbandoned) // no baseline yet: ignored
		run(10*time.Millisecond, LimitSampled)   // baseline 10 ms
		run(15*time.Millisecond, LimitAbandoned) // left early: ignored
		run(time.Second, LimitAbandoned)         // left late: a drop
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.windows) != 2 || rec.windows[0].RTT != 10*time.Millisecond || rec.windows[1].Drops != 1 || rec.windows[1].Samples != 0 {
			t.Fatalf("windows %+v, want a 10 ms sample then one drop", rec.windows)
		}
	})
}
