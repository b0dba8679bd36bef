package resilience

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestCoDelOptionsValidation(t *testing.T) {
	for _, c := range []struct {
		o     CoDelOptions
		field string
	}{
		{CoDelOptions{Interval: -1}, "ConcurrencyLimiterOptions.CoDel.Interval"},
		{CoDelOptions{Target: -1}, "ConcurrencyLimiterOptions.CoDel.Target"},
	} {
		_, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, CoDel: &c.o})
		wantConfigField(t, err, c.field)
	}
	if _, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, CoDel: &CoDelOptions{}}); err != nil {
		t.Fatal(err)
	}
}

// Invariant: a queue that absorbs a burst (empty again within the
// interval) keeps the configured queue timeout; once it has stood for an
// interval, newcomers get the short target and stale waiters are
// rejected instead of granted late.
func TestCoDelShortensTimeoutOnlyWhenStanding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 10, QueueTimeout: time.Second,
			CoDel: &CoDelOptions{Interval: 100 * time.Millisecond, Target: 5 * time.Millisecond}})
		if err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		old := startAcquire(l, 0) // queue non-empty from now
		time.Sleep(50 * time.Millisecond)
		old.wantWaiting(t) // a burst: not standing yet, normal timeout
		time.Sleep(60 * time.Millisecond)
		// Standing now: a newcomer gets the 5 ms target, and the old
		// waiter (110 ms) is purged as stale by that queue operation.
		young := startAcquire(l, 0)
		wantReason(t, old.wantResult(t), ReasonQueueTimeout)
		young.wantWaiting(t)
		time.Sleep(6 * time.Millisecond)
		synctest.Wait()
		wantReason(t, young.wantResult(t), ReasonQueueTimeout)
		l.Release()
		wantStats(t, l, LimiterStats{Limit: 1})
	})
}

// Invariant: an eviction that makes room for a newcomer is not the queue
// draining. With a queue of one and drop-oldest, every arrival evicts the
// only waiter and so empties the queue for an instant; that used to restart
// the interval on each push, so a queue that never drained never counted as
// standing and newcomers kept the full queue timeout.
func TestCoDelEvictionFromQueueOfOneKeepsStanding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Second,
			Overflow: OverflowDropOldest,
			CoDel:    &CoDelOptions{Interval: 100 * time.Millisecond, Target: 5 * time.Millisecond}})
		if err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		// An arrival every 2 ms for 150 ms: the queue holds one waiter the
		// whole time, each newcomer evicting the one before.
		prev := startAcquire(l, 0)
		for range 75 {
			time.Sleep(2 * time.Millisecond)
			next := startAcquire(l, 0)
			wantReason(t, prev.wantResult(t), ReasonDropped)
			prev = next
		}
		// The queue has stood for 150 ms, so the last newcomer got the 5 ms
		// target, not the 1 s queue timeout.
		prev.wantWaiting(t)
		time.Sleep(6 * time.Millisecond)
		synctest.Wait()
		if _, ok := prev.result(); !ok {
			prev.cancel() // end the wait, so the bubble can exit
			synctest.Wait()
			t.Fatal("the last waiter is still queued after the 5 ms target: the queue never counted as standing")
		}
		wantReason(t, prev.wantResult(t), ReasonQueueTimeout)
		l.Release()
		wantStats(t, l, LimiterStats{Limit: 1})
	})
}

// Adaptive LIFO: while the queue stands, a freed permit goes to the newest
// waiter.
func TestCoDelAdaptiveLIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 10,
			CoDel: &CoDelOptions{Interval: 10 * time.Millisecond, Target: time.Second, AdaptiveLIFO: true}})
		if err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		first := startAcquire(l, 0)
		time.Sleep(20 * time.Millisecond)
		second := startAcquire(l, 0)
		l.Release()
		synctest.Wait()
		second.wantGranted(t)
		first.wantWaiting(t)
		l.Release()
		synctest.Wait()
		first.wantGranted(t)
		l.Release()
	})
}

// codelSim offers 1.6 times the capacity of a fixed limiter (permit limit =
// capacity, queue = permit limit) for 20 s and returns the admitted
// latencies (queue wait plus service) after a 2 s warm-up, and the goodput
// over that span.
func codelSim(t *testing.T, codel *CoDelOptions) (lat []time.Duration, goodput float64) {
	const (
		permits = 100
		service = 100 * time.Millisecond
		rate    = 1600 // 1.6 × 100 / 100 ms
		warmup  = 2 * time.Second
		run     = 20 * time.Second
	)
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: permits, QueueLimit: permits,
			QueueTimeout: time.Second, CoDel: codel})
		start := time.Now()
		var mu sync.Mutex
		completed := 0
		var wg sync.WaitGroup
		const tick = time.Millisecond
		owed := 0.0
		for el := time.Duration(0); el < run; el += tick {
			owed += rate * tick.Seconds()
			for ; owed >= 1; owed-- {
				wg.Go(func() {
					t0 := time.Now()
					err := l.Execute(context.Background(), Telemetry{}, func(context.Context) error {
						time.Sleep(service)
						return nil
					})
					end := time.Now()
					if err != nil || t0.Sub(start) < warmup || end.Sub(start) > run {
						return
					}
					mu.Lock()
					lat = append(lat, end.Sub(t0))
					completed++
					mu.Unlock()
				})
			}
			time.Sleep(tick)
		}
		wg.Wait()
		capacity := float64(permits) / service.Seconds() * (run - warmup - service).Seconds()
		goodput = float64(completed) / capacity
	})
	slices.Sort(lat)
	return lat, goodput
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	return sorted[int(p*float64(len(sorted)-1))]
}

// The overload check: under sustained 1.6× overload, CoDel keeps
// admitted p99 latency within 1.2 × the service time with goodput ≥ 97 %,
// while plain FIFO shows the standing queue's delay.
func TestCoDelSustainedOverloadSimulation(t *testing.T) {
	const service = 100 * time.Millisecond
	fifo, fifoGood := codelSim(t, nil)
	cd, cdGood := codelSim(t, &CoDelOptions{})
	t.Logf("FIFO:  admitted p50 %v p99 %v, goodput %.1f%%", percentile(fifo, 0.5), percentile(fifo, 0.99), 100*fifoGood)
	t.Logf("CoDel: admitted p50 %v p99 %v, goodput %.1f%%", percentile(cd, 0.5), percentile(cd, 0.99), 100*cdGood)
	if p99 := percentile(cd, 0.99); p99 > service*12/10 {
		t.Errorf("CoDel admitted p99 = %v, want ≤ %v", p99, service*12/10)
	}
	if cdGood < 0.97 {
		t.Errorf("CoDel goodput = %.1f%%, want ≥ 97%%", 100*cdGood)
	}
	if p50 := percentile(fifo, 0.5); p50 < service*3/2 {
		t.Errorf("FIFO admitted p50 = %v; the standing queue should make it ≥ %v", p50, service*3/2)
	}
}

// Invariant: under CoDel a standing queue sheds the less important classes
// first. A service with a fixed service time frees its permits in bursts
// (100 permits held 200 ms, admitted as fast as requests arrive), so every
// waiter sits through gaps of about 100 ms without a grant; at 1000 req/s
// offered against 500 of capacity, 30 % of them important, the important
// class must still be served in full (the other classes took the gaps'
// shedding). Before, CoDel rejected every waiter past its target whatever
// its priority, and the important class got the same 50 % as the rest.
func TestCoDelServesTheBestClassInFullUnderBurstyGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 100, QueueTimeout: 500 * time.Millisecond,
			CoDel: &CoDelOptions{}, Priority: clPriority})
		if err != nil {
			t.Fatal(err)
		}
		var sent, served [2]atomic.Int64
		var wg sync.WaitGroup
		for i := range 10000 { // 10 s at 1000/s
			class, prio := 0, 5
			if i%10 < 3 {
				class, prio = 1, 0
			}
			sent[class].Add(1)
			ctx := clPriorityKey.With(context.Background(), prio)
			wg.Go(func() {
				start := time.Now()
				if l.Acquire(ctx) != nil {
					return
				}
				time.Sleep(200 * time.Millisecond)
				l.Release()
				if time.Since(start) <= time.Second { // the client's timeout
					served[class].Add(1)
				}
			})
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
		high := float64(served[1].Load()) / float64(sent[1].Load())
		low := float64(served[0].Load()) / float64(sent[0].Load())
		if high < 0.99 {
			t.Fatalf("important class served %.1f %% in time (others %.1f %%), want at least 99 %%", 100*high, 100*low)
		}
		if total := served[0].Load() + served[1].Load(); total < 4900 {
			t.Fatalf("%d served in 10 s, want the capacity of about 5000", total)
		}
	})
}
