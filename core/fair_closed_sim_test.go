package resilience

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Invariant: with a Flow function and CoDel, on the fixed and the
// adaptive limiter, closed-loop clients that re-send at once after a
// rejection cannot take a quiet tenant's share: one noisy tenant of 100
// workers and nine quiet tenants of one worker each (each asks for one
// permit, under its share of the 20), against 20 slots held 200 ms, queue
// 100, 500 ms queue timeout. Every quiet tenant gets at least 99 % of its
// requests answered within the client's second. Before CoDel judged a
// flow by its share of the permits, a quiet tenant's re-send after a shed
// was held to the 5 ms target and shed again: 15 to 53 % in time.
func TestFairClosedLoopQuietTenantsInTime(t *testing.T) {
	for _, adaptive := range []bool{false, true} {
		t.Run(fmt.Sprintf("adaptive=%v", adaptive), func(t *testing.T) {
			sent, inTime := simClosedLoopFair(t, adaptive)
			t.Logf("sent %v, in time %v", sent, inTime)
			for i := 1; i < len(sent); i++ {
				if s := float64(inTime[i]) / float64(max(sent[i], 1)); s < 0.99 || sent[i] == 0 {
					t.Errorf("quiet tenant %d: %d of %d in time, want ≥ 99 %%", i, inTime[i], sent[i])
				}
			}
		})
	}
}

// simClosedLoopFair runs the closed loop for 5 s of synthetic time after
// a 2 s warm-up and returns each tenant's requests sent and answered in
// time (tenant 0 is the noisy one).
func simClosedLoopFair(t *testing.T, adaptive bool) (sent, inTime []int) {
	const (
		hold   = 200 * time.Millisecond
		client = time.Second
		warmup = 2 * time.Second
		run    = 7 * time.Second
	)
	workers := []int{100, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	sent, inTime = make([]int, len(workers)), make([]int, len(workers))
	synctest.Test(t, func(t *testing.T) {
		flow := func(ctx context.Context) string { return ctx.Value(simFlowKey{}).(string) }
		var lim Strategy
		var err error
		if adaptive {
			lim, err = NewAdaptiveLimiter(AdaptiveLimiterOptions{
				QueueLimit: 100, QueueTimeout: 500 * time.Millisecond, IgnoreCPUWait: true,
				Flow: flow, CoDel: &CoDelOptions{},
			})
		} else {
			lim, err = NewConcurrencyLimiter(ConcurrencyLimiterOptions{
				PermitLimit: 20, QueueLimit: 100, QueueTimeout: 500 * time.Millisecond,
				Flow: flow, CoDel: &CoDelOptions{},
			})
		}
		if err != nil {
			t.Fatal(err)
		}
		svc := &slotService{hold: hold, size: 20}
		work := func(context.Context) error { svc.call(); return nil }
		var (
			mu sync.Mutex
			wg sync.WaitGroup
		)
		start := time.Now()
		for i, n := range workers {
			key := fmt.Sprint(i)
			for k := range n {
				wg.Go(func() {
					time.Sleep(time.Duration(k) * hold / time.Duration(n))
					for time.Since(start) < run {
						t0 := time.Now()
						ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), simFlowKey{}, key), client)
						err := lim.Execute(ctx, Telemetry{}, work)
						cancel()
						if t0.Sub(start) >= warmup {
							mu.Lock()
							sent[i]++
							if err == nil && time.Since(t0) <= client {
								inTime[i]++
							}
							mu.Unlock()
						}
						if err != nil {
							time.Sleep(time.Millisecond) // a round trip, then at once again
						}
					}
				})
			}
		}
		wg.Wait()
	})
	return sent, inTime
}
