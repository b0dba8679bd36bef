package resilience

import (
	"context"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ylcnfrht/resilience/core/limit"
)

// The CPU wait of a window is the mean of the scheduler-latency histogram's
// growth since the previous read, each bucket at its midpoint and the open
// ends at their finite bound.
func TestMeanWaitOfHistogramGrowth(t *testing.T) {
	inf := math.Inf(1)
	buckets := []float64{math.Inf(-1), 0, 0.001, 0.003, inf}
	last := []uint64{0, 5, 5, 0}
	counts := []uint64{0, 5 + 3, 5 + 1, 0 + 0} // 3 at 0.5 ms, 1 at 2 ms
	if got, want := meanWait(buckets, counts, last), 875*time.Microsecond; got != want {
		t.Fatalf("mean wait = %v, want %v", got, want)
	}
	if got := meanWait(buckets, counts, last); got != 0 {
		t.Fatalf("second read with no growth = %v, want 0", got)
	}
	counts[3] = 2 // two in the open bucket: taken at its lower bound, 3 ms
	if got, want := meanWait(buckets, counts, last), 3*time.Millisecond; got != want {
		t.Fatalf("mean wait of the open bucket = %v, want %v", got, want)
	}
}

// Invariant: a process whose goroutines queue for the CPU is overloaded
// even when every execution the limiter times is fast: its windows count
// drops and the limit falls. With IgnoreCPUWait the same load counts no
// drop (its latency alone may still lower the limit). Real time and real spinning goroutines, since the
// scheduler's latency is the signal; the assertions hold however loaded
// the machine is (more load only means longer waits).
func TestAdaptiveLimitFallsWhileTheCPUQueues(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		rec := &windowRecorder{Algorithm: mustGradient2(t)}
		lim, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{Algorithm: rec, InitialLimit: 50, IgnoreCPUWait: ignore})
		if err != nil {
			t.Fatal(err)
		}
		// Fast executions learn a baseline of well under a millisecond.
		for range 200 {
			_ = lim.Execute(context.Background(), Telemetry{}, func(context.Context) error { return nil })
		}
		// Then spinners keep every P busy, so each goroutine waits about
		// (spinners / GOMAXPROCS) × 10 ms preemption slices for a CPU.
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 4 * runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for !stop.Load() {
				}
			})
		}
		run := 5 * time.Second
		if ignore {
			run = 500 * time.Millisecond
		}
		// Run until the limit is below half and a window counted a drop:
		// latency noise alone (a loaded machine, -race) may lower the limit
		// before the spinners make any goroutine wait.
		seen, sawDrop := 0, false
		drops := func() bool {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for ; seen < len(rec.windows) && !sawDrop; seen++ {
				sawDrop = rec.windows[seen].Drops > 0
			}
			return sawDrop
		}
		deadline := time.Now().Add(run)
		for time.Now().Before(deadline) && (ignore || lim.Stats().Limit >= 25 || !drops()) {
			_ = lim.Execute(context.Background(), Telemetry{}, func(context.Context) error { return nil })
		}
		stop.Store(true)
		wg.Wait()
		rec.mu.Lock()
		var waited, dropped int
		for _, w := range rec.windows {
			if w.CPUWait > 0 {
				waited++
			}
			if w.Drops > 0 {
				dropped++
			}
		}
		rec.mu.Unlock()
		limit := lim.Stats().Limit
		if ignore {
			if waited != 0 || dropped != 0 {
				t.Fatalf("IgnoreCPUWait: %d windows with a CPU wait, %d with drops; want none", waited, dropped)
			}
			continue
		}
		if dropped == 0 || limit >= 25 {
			t.Fatalf("CPU queueing: %d windows with drops (%d with a CPU wait), limit %d; want drops and the limit below half of 50", dropped, waited, limit)
		}
	}
}

func mustGradient2(t *testing.T) *limit.Gradient2 {
	t.Helper()
	g, err := limit.NewGradient2(limit.Gradient2Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}
