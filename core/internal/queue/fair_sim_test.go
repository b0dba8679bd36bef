// The simulations check the discipline's outcome on a fake clock; the race
// detector adds nothing to them but minutes (the state machines cover races).

//go:build !race

package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fairSim runs the lab's fair scenario on a fake clock: 100 permits held
// 200 ms each (500 req/s), one flow offering 600 req/s and nine 44 req/s,
// queue 100 with a 500 ms queue timeout, clients that give up after 1 s.
// It returns each flow's share of requests answered in time and the
// goodput as a share of capacity.
func fairSim(t *testing.T, o Options, poissonArrivals bool) (share []float64, goodput float64) {
	return fairSimRates(t, o, poissonArrivals, []float64{600, 44, 44, 44, 44, 44, 44, 44, 44, 44}, nil)
}

func fairSimRates(t *testing.T, o Options, poissonArrivals bool, rates []float64, lat *[]time.Duration) (share []float64, goodput float64) {
	const (
		permits = 100
		service = 200 * time.Millisecond
		client  = time.Second
		warmup  = 2 * time.Second
		run     = 12 * time.Second
	)
	o.Limit, o.QueueLimit, o.QueueTimeout = permits, 100, 500*time.Millisecond
	sent := make([]int, len(rates))
	inTime := make([]int, len(rates))
	okTotal := 0
	synctest.Test(t, func(t *testing.T) {
		e := newTestEngine(o)
		rng := rand.New(rand.NewPCG(1, 2))
		start := time.Now()
		var mu sync.Mutex
		var wg sync.WaitGroup
		next := make([]time.Duration, len(rates))
		for i := range next {
			next[i] = time.Duration(rng.Float64() * float64(time.Second) / rates[i])
		}
		const tick = 100 * time.Microsecond
		for el := time.Duration(0); el < run; el += tick {
			for i, r := range rates {
				for next[i] <= el {
					gap := float64(time.Second) / r
					if poissonArrivals {
						gap *= rng.ExpFloat64()
					}
					next[i] += time.Duration(gap)
					flow := fmt.Sprint(i)
					wg.Go(func() {
						t0 := time.Now()
						ctx, cancel := context.WithTimeout(context.Background(), client)
						defer cancel()
						_, res, f := e.AcquireRanked(ctx, func(context.Context) Rank { return Rank{Flow: flow} }, true)
						if res == Admitted {
							time.Sleep(service)
							e.ReleaseFlow(f)
						}
						if t0.Sub(start) < warmup {
							return
						}
						mu.Lock()
						defer mu.Unlock()
						sent[i]++
						if res == Admitted && time.Since(t0) <= client {
							inTime[i]++
							okTotal++
							if lat != nil {
								*lat = append(*lat, time.Since(t0))
							}
						}
					})
				}
			}
			time.Sleep(tick)
		}
		wg.Wait()
	})
	for i := range rates {
		share = append(share, float64(inTime[i])/float64(sent[i]))
	}
	capacity := float64(permits) / service.Seconds() * (run - warmup).Seconds()
	return share, float64(okTotal) / capacity
}

// TestFairSimulation: in the lab's fair scenario on a fake clock, every
// quiet flow gets at least 99 % of its requests answered in time and the
// noisy flow the rest of the capacity (goodput at least 99 % of it), with
// reject-new, with drop-oldest and with CoDel, for even and Poisson
// arrivals. A regression test of the discipline, not a measurement: the
// lab measures it on real sockets.
func TestFairSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	for _, c := range []struct {
		name string
		o    Options
	}{
		{"reject-new", Options{Fair: true}},
		{"drop-oldest", Options{Fair: true, Overflow: DropOldest}},
		{"codel", Options{Fair: true, CoDel: &CoDel{}}},
	} {
		for _, poisson := range []bool{false, true} {
			name := fmt.Sprintf("%s/poisson=%v", c.name, poisson)
			t.Run(name, func(t *testing.T) {
				share, goodput := fairSim(t, c.o, poisson)
				t.Logf("shares %.3f, goodput %.3f of capacity", share, goodput)
				for i, s := range share[1:] {
					if s < 0.99 {
						t.Errorf("quiet flow %d: %.3f in time, want at least 0.99", i+1, s)
					}
				}
				if goodput < 0.99 {
					t.Errorf("goodput %.3f of capacity, want at least 0.99", goodput)
				}
			})
		}
	}
}

// TestFairSimulationSymmetric: when every flow asks for more than its
// share (ten flows of 80 req/s against 500), a fair queue with CoDel
// shares the capacity evenly and keeps the goodput. (Its p99 is that of
// a queue without CoDel, see BENCHMARKS.md: every flow is shed now and
// then, and one not shed within the interval keeps its queue timeout.)
func TestFairSimulationSymmetric(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	rates := []float64{80, 80, 80, 80, 80, 80, 80, 80, 80, 80}
	var lat []time.Duration
	share, goodput := fairSimRates(t, Options{Fair: true, CoDel: &CoDel{}}, true, rates, &lat)
	slices.Sort(lat)
	t.Logf("shares %.2f, goodput %.3f, p50 %v, p99 %v", share, goodput, lat[len(lat)/2], lat[len(lat)*99/100])
	lo, hi := slices.Min(share), slices.Max(share)
	if hi-lo > 0.1 {
		t.Errorf("shares from %.2f to %.2f, want within 0.1", lo, hi)
	}
	if goodput < 0.99 {
		t.Errorf("goodput %.3f of capacity, want at least 0.99", goodput)
	}
}
