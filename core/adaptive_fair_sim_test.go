package resilience

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type simFlowKey struct{}

// Invariant: an adaptive limiter with a fair queue serves every flow that
// asks for less than its fair share in time from the start, warm-up
// included, and keeps the service at capacity. The lab's fair scenario in
// synthetic time (100 slots × 200 ms, 500 executions/s; one flow offering
// 600/s and nine 44/s, evenly; queue 100 with a 500 ms queue timeout;
// clients that give up after 1 s; 20 s): each quiet flow gets at least
// 99 % of its requests answered within the client's second, and the
// goodput is at least 99 % of capacity, with and without CoDel. From the
// default initial limit of 20, doubling every other window left the limit
// at 20 and 40 for most of the first second, below the quiet flows'
// 88 permits: 1.05 % of each one's requests were shed there (98.95 %).
func TestAdaptiveFairQuietFlowsInTimeFromWarmUp(t *testing.T) {
	for _, codel := range []bool{false, true} {
		t.Run(fmt.Sprintf("codel=%v", codel), func(t *testing.T) {
			shares, goodput := simAdaptiveFair(t, codel)
			t.Logf("in time per flow %.4f, goodput %.1f %% of capacity", shares, 100*goodput)
			for i, s := range shares[1:] {
				if s < 0.99 {
					t.Errorf("quiet flow %d: %.2f %% in time, want ≥ 99 %%", i+1, 100*s)
				}
			}
			if goodput < 0.99 {
				t.Errorf("goodput %.1f %% of capacity, want ≥ 99 %%", 100*goodput)
			}
		})
	}
}

// simAdaptiveFair runs the fair scenario against the default adaptive
// limiter with a flow per tenant and returns each flow's share answered in
// time and the goodput over the slots' capacity.
func simAdaptiveFair(t *testing.T, codel bool) (shares []float64, goodput float64) {
	const (
		hold   = 200 * time.Millisecond
		run    = 20 * time.Second
		client = time.Second
	)
	rates := []float64{600, 44, 44, 44, 44, 44, 44, 44, 44, 44}
	sent, inTime := make([]int, len(rates)), make([]int, len(rates))
	synctest.Test(t, func(t *testing.T) {
		o := AdaptiveLimiterOptions{
			QueueLimit: 100, QueueTimeout: 500 * time.Millisecond, IgnoreCPUWait: true,
			Flow: func(ctx context.Context) string { return ctx.Value(simFlowKey{}).(string) },
		}
		if codel {
			o.CoDel = &CoDelOptions{}
		}
		lim, err := NewAdaptiveLimiter(o)
		if err != nil {
			t.Fatal(err)
		}
		svc := &slotService{hold: hold, size: 100}
		work := func(context.Context) error { svc.call(); return nil }
		var (
			mu sync.Mutex
			wg sync.WaitGroup
		)
		next := make([]time.Duration, len(rates))
		for i := range next { // a phase of its own per flow
			next[i] = time.Duration(float64(i) / float64(len(rates)) * float64(time.Second) / rates[i])
		}
		start := time.Now()
		const tick = 500 * time.Microsecond
		for el := time.Duration(0); el < run; el += tick {
			for i, r := range rates {
				for ; next[i] <= el; next[i] += time.Duration(float64(time.Second) / r) {
					flow := fmt.Sprint(i)
					wg.Go(func() {
						t0 := time.Now()
						ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), simFlowKey{}, flow), client)
						defer cancel()
						err := lim.Execute(ctx, Telemetry{}, work)
						ok := err == nil && time.Since(t0) <= client
						mu.Lock()
						sent[i]++
						if ok {
							inTime[i]++
						}
						mu.Unlock()
					})
				}
			}
			time.Sleep(time.Until(start.Add(el + tick)))
		}
		wg.Wait()
	})
	total := 0
	for i := range rates {
		shares = append(shares, float64(inTime[i])/float64(sent[i]))
		total += inTime[i]
	}
	return shares, float64(total) / run.Seconds() / (100 / hold.Seconds())
}
