//go:build !race

package queue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// closedSimConfig is a closed-loop run on a fake clock: each flow is a
// number of workers that send their next request as soon as the last one
// is answered, and re-send at once after a rejection (the usual client:
// a worker pool with an immediate retry). Flow 0 is the noisy tenant.
type closedSimConfig struct {
	o       Options
	permits int
	workers []int // per flow
	// think is the pause of a quiet worker (every flow but 0) between an
	// answer and its next request; 0: none.
	think time.Duration
	// bursty frees permits in bursts a service time apart, as the lab's
	// slot service does once its slots fall in step.
	bursty bool
}

// closedSimResult is what runClosedSim measured after its warm-up: each
// flow's requests sent and answered in time, the latency of the admitted
// requests (sorted) and of the rejected ones (sorted), and the goodput
// over the capacity.
type closedSimResult struct {
	sent, inTime []int
	lat, shedLat []time.Duration
	goodput      float64
}

func (r closedSimResult) share(i int) float64 {
	if r.sent[i] == 0 {
		return 1
	}
	return float64(r.inTime[i]) / float64(r.sent[i])
}

func runClosedSim(t *testing.T, c closedSimConfig) closedSimResult {
	const (
		service = 200 * time.Millisecond
		client  = time.Second
		warmup  = 2 * time.Second
		run     = 10 * time.Second
	)
	o := c.o
	o.Limit, o.QueueLimit, o.QueueTimeout = c.permits, 100, 500*time.Millisecond
	res := closedSimResult{sent: make([]int, len(c.workers)), inTime: make([]int, len(c.workers))}
	okTotal := 0
	synctest.Test(t, func(t *testing.T) {
		e := newTestEngine(o)
		start := time.Now()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i, n := range c.workers {
			flow := fmt.Sprint(i)
			for k := range n {
				wg.Go(func() {
					// Workers start spread over a service time, as a pool
					// that ramps up would.
					time.Sleep(time.Duration(k) * service / time.Duration(n))
					for time.Since(start) < run {
						t0 := time.Now()
						ctx, cancel := context.WithTimeout(context.Background(), client)
						_, r, f := e.AcquireRanked(ctx, func(context.Context) Rank { return Rank{Flow: flow} }, true)
						if r == Admitted {
							hold := service
							if c.bursty {
								hold = service - time.Since(start)%service
							}
							time.Sleep(hold)
							e.ReleaseFlow(f)
						}
						cancel()
						lat := time.Since(t0)
						if t0.Sub(start) >= warmup {
							mu.Lock()
							res.sent[i]++
							if r == Admitted && lat <= client {
								res.inTime[i]++
								okTotal++
								res.lat = append(res.lat, lat)
							} else if r != Admitted {
								res.shedLat = append(res.shedLat, lat)
							}
							mu.Unlock()
						}
						if r != Admitted {
							// A rejection that took no time would spin
							// on the fake clock: a round trip's worth.
							time.Sleep(100 * time.Microsecond)
							continue
						}
						if i > 0 && c.think > 0 {
							time.Sleep(c.think)
						}
					}
				})
			}
		}
		wg.Wait()
	})
	slices.Sort(res.lat)
	slices.Sort(res.shedLat)
	capacity := float64(c.permits) / service.Seconds() * (run - warmup).Seconds()
	res.goodput = float64(okTotal) / capacity
	return res
}

func (r closedSimResult) log(t *testing.T, name string) {
	t.Helper()
	shares := make([]float64, len(r.sent))
	for i := range shares {
		shares[i] = r.share(i)
	}
	t.Logf("%s: shares %.3f, goodput %.3f, admitted p50 %v p99 %v, rejected p99 %v", name, shares, r.goodput,
		pct(r.lat, 50), pct(r.lat, 99), pct(r.shedLat, 99))
}

// TestFairClosedLoopSimulation: with closed-loop clients that re-send at
// once after a rejection (one noisy tenant of 100 workers, nine quiet
// tenants of one worker each, 20 permits held 200 ms each, queue 100,
// 500 ms queue timeout), every quiet tenant asks for less than its share
// (one permit of two) and gets at least 99 % of its requests answered in
// time, with and without CoDel, with permits freed evenly or in bursts.
// CoDel's drops must land on the noisy tenant: before they did, a quiet
// tenant's waiter shed once made the tenant "shed within the interval",
// its immediate re-send was held to the 5 ms target and shed again, and
// quiet tenants lost up to half their requests.
func TestFairClosedLoopSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	workers := []int{100, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	for _, c := range []struct {
		name string
		o    Options
	}{
		{"fair", Options{Fair: true}},
		{"fair-codel", Options{Fair: true, CoDel: &CoDel{}}},
		{"fair-codel-lifo", Options{Fair: true, CoDel: &CoDel{AdaptiveLIFO: true}}},
	} {
		for _, bursty := range []bool{false, true} {
			name := fmt.Sprintf("%s/bursty=%v", c.name, bursty)
			t.Run(name, func(t *testing.T) {
				r := runClosedSim(t, closedSimConfig{o: c.o, permits: 20, workers: workers, bursty: bursty})
				r.log(t, name)
				for i := 1; i < len(workers); i++ {
					if s := r.share(i); s < 0.99 {
						t.Errorf("quiet tenant %d: %.3f in time (%d of %d), want at least 0.99", i, s, r.inTime[i], r.sent[i])
					}
				}
				if r.goodput < 0.99 {
					t.Errorf("goodput %.3f of capacity, want at least 0.99", r.goodput)
				}
			})
		}
	}
}
