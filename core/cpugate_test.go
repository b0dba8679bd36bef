package resilience

import (
	"context"
	"errors"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/limit"
)

// The mean CPU wait is the mean of the scheduler-latency histogram's
// growth since the previous read, each bucket at its midpoint and the open
// ends at their finite bound; the growth is the goroutines scheduled.
func TestMeanWaitOfHistogramGrowth(t *testing.T) {
	inf := math.Inf(1)
	buckets := []float64{math.Inf(-1), 0, 0.001, 0.003, inf}
	last := []uint64{0, 5, 5, 0}
	counts := []uint64{0, 5 + 3, 5 + 1, 0 + 0} // 3 at 0.5 ms, 1 at 2 ms
	if got, n := meanWait(buckets, counts, last); got != 875*time.Microsecond || n != 4 {
		t.Fatalf("mean wait = %v of %d, want 875µs of 4", got, n)
	}
	if got, n := meanWait(buckets, counts, last); got != 0 || n != 0 {
		t.Fatalf("second read with no growth = %v of %d, want 0 of 0", got, n)
	}
	counts[3] = 2 // two in the open bucket: taken at its lower bound, 3 ms
	if got, n := meanWait(buckets, counts, last); got != 3*time.Millisecond || n != 2 {
		t.Fatalf("mean wait of the open bucket = %v of %d, want 3ms of 2", got, n)
	}
}

// The run queue drains at the CPU time per scheduled goroutine, spread
// over the Ps: 10 runnable, 100 scheduled in 0.2 CPU seconds on 2 Ps is
// 10 ms. Nothing runnable, or nothing scheduled to learn from, is no
// estimate.
func TestDrainTime(t *testing.T) {
	for _, c := range []struct {
		runnable, scheduled uint64
		busy                float64
		procs               int
		want                time.Duration
	}{
		{10, 100, 0.2, 2, 10 * time.Millisecond},
		{10, 100, 0.2, 1, 20 * time.Millisecond},
		{0, 100, 0.2, 2, 0},
		{10, 0, 0.2, 2, 0},
		{10, 100, 0, 2, 0},
	} {
		if got := drainTime(c.runnable, c.scheduled, c.busy, c.procs); got != c.want {
			t.Errorf("drainTime(%d, %d, %v, %d) = %v, want %v", c.runnable, c.scheduled, c.busy, c.procs, got, c.want)
		}
	}
}

// The gate's share after one reading: over the bound it keeps
// 1 - wait/(20·bound), at most 9/10 and at least 1/2 however long the
// wait (a wait of 100 bounds halves it too), never below 1/16; within the
// bound it grows back, by 1/32 within half of it and 1/128 above that.
func TestCPUGateAfterAReading(t *testing.T) {
	const b = 2 * time.Millisecond
	for _, c := range []struct {
		admit uint32
		wait  time.Duration
		want  uint32
	}{
		{gateScale, b + 1, gateScale * 9 / 10},
		{gateScale, 4 * b, gateScale - gateScale/5},
		{gateScale, 10 * b, gateScale / 2},
		{gateScale, 100 * b, gateScale / 2},
		{gateMin + 1, 100 * b, gateMin},
		{gateScale / 2, b / 4, gateScale/2 + gateRecover},
		{gateScale / 2, b * 3 / 4, gateScale/2 + gateRecover/4},
		{gateScale - 1, 0, gateScale},
	} {
		if got := nextShare(c.admit, c.wait, b); got != c.want {
			t.Errorf("share %d after a wait of %v (bound %v) = %d, want %d", c.admit, c.wait, b, got, c.want)
		}
	}
}

// fakeCPU is a CPU-wait reading the test sets.
type fakeCPU struct{ wait atomic.Int64 }

func (f *fakeCPU) read(int) time.Duration { return time.Duration(f.wait.Load()) }

// Invariant: a CPU-bound handler runs to completion, so its in-flight
// count stays at the Ps however long the run queue before it grows, and
// no limit sheds that queue. While the CPU wait exceeds the limiter's
// normal latency, the CPU gate refuses a share of the executions that find
// a permit free (at once, ErrRejected), never all of them; once the CPU
// keeps up again it admits every one.
func TestAdaptiveCPUGateShedsBelowTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{InitialLimit: 50})
		if err != nil {
			t.Fatal(err)
		}
		cpu := &fakeCPU{}
		lim.gate.cpu = cpu
		// One execution at a time, 2 ms each, one every 3 ms: in flight
		// never exceeds 1 of the limit of 50.
		phase := func(d time.Duration) (admitted, refused int) {
			for el := time.Duration(0); el < d; el += 3 * time.Millisecond {
				err := lim.Execute(context.Background(), Telemetry{}, func(context.Context) error {
					time.Sleep(2 * time.Millisecond)
					return nil
				})
				switch {
				case err == nil:
					admitted++
				case errors.Is(err, ErrRejected):
					refused++
					var re *ConcurrencyLimitRejectedError
					if !errors.As(err, &re) || re.Reason != ReasonFull {
						t.Fatalf("refused with %v, want ReasonFull", err)
					}
					time.Sleep(2 * time.Millisecond)
				default:
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
			return admitted, refused
		}
		if a, r := phase(time.Second); r != 0 {
			t.Fatalf("CPU keeping up: %d admitted, %d refused; want none refused", a, r)
		}
		cpu.wait.Store(int64(50 * time.Millisecond)) // 25 times the 2 ms latency
		a, r := phase(2 * time.Second)
		if r == 0 || a == 0 || a > r {
			t.Fatalf("CPU queueing: %d admitted, %d refused; want most refused, never all", a, r)
		}
		if s := lim.Stats(); s.Limit < 50 {
			t.Errorf("limit %d: the gate, not the limit, answers the CPU wait", s.Limit)
		}
		cpu.wait.Store(0)
		phase(time.Second) // the gate reopens
		if a, r := phase(time.Second); r != 0 {
			t.Fatalf("CPU keeping up again: %d admitted, %d refused; want none refused", a, r)
		}
	})
}

// The same with the real scheduler: spinning goroutines keep every P
// busy, so each goroutine waits about (spinners / GOMAXPROCS) × 10 ms
// preemption slices for a CPU, while the limiter's executions, one at a
// time, are fast and far below the limit. The gate refuses some of them;
// with IgnoreCPUWait none is refused and no window reports a CPU wait.
// The assertions hold however loaded the machine is (more load only means
// longer waits).
func TestAdaptiveShedsWhileTheCPUQueues(t *testing.T) {
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
		refused := 0
		deadline := time.Now().Add(run)
		for time.Now().Before(deadline) && (ignore || refused == 0) {
			if err := lim.Execute(context.Background(), Telemetry{}, func(context.Context) error { return nil }); errors.Is(err, ErrRejected) {
				refused++
			}
		}
		stop.Store(true)
		wg.Wait()
		rec.mu.Lock()
		waited := 0
		for _, w := range rec.windows {
			if w.CPUWait > 0 {
				waited++
			}
		}
		rec.mu.Unlock()
		if ignore {
			if waited != 0 || refused != 0 {
				t.Fatalf("IgnoreCPUWait: %d windows with a CPU wait, %d refused; want none", waited, refused)
			}
			continue
		}
		if refused == 0 {
			t.Fatalf("CPU queueing: nothing refused in %v (%d windows with a CPU wait)", run, waited)
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

// The gate admits its share of the executions that find a permit free,
// spread evenly: at a quarter, every fourth one.
func TestCPUGateAdmitsItsShareEvenly(t *testing.T) {
	g := cpuGate{admit: gateScale / 4}
	var got []bool
	for range 12 {
		got = append(got, g.admitLocked())
	}
	want := []bool{false, false, false, true, false, false, false, true, false, false, false, true}
	if !slices.Equal(got, want) {
		t.Fatalf("admissions at a quarter = %v, want %v", got, want)
	}
	open := cpuGate{admit: gateScale}
	for range 100 {
		if !open.admitLocked() {
			t.Fatal("an open gate refused an execution")
		}
	}
}

// A reading is due at most every cpuReadEvery, and never with the gate
// off; a reading sets the share from the wait against the bound and
// keeps the wait for the next window's sample.
func TestCPUGateReadsAtMostEveryInterval(t *testing.T) {
	cpu := &fakeCPU{}
	g := cpuGate{cpu: cpu, admit: gateScale}
	every := cpuReadEvery
	for _, c := range []struct {
		now  int64
		want bool
	}{{every, true}, {every + 1, false}, {2*every - 1, false}, {2 * every, true}, {2 * every, false}} {
		if got := g.dueLocked(c.now); got != c.want {
			t.Errorf("due at %d = %v, want %v", c.now, got, c.want)
		}
	}
	off := newCPUGate(true)
	if off.dueLocked(10*every) || off.admit != gateScale {
		t.Fatal("a gate that is off reads the CPU or does not admit everything")
	}

	var mu sync.Mutex
	cpu.wait.Store(int64(10 * time.Millisecond))
	if w := g.read(&mu, time.Millisecond); w != 10*time.Millisecond || g.wait != w || g.admit != gateScale/2 {
		t.Fatalf("after a wait of 10 bounds: reading %v, kept %v, share %d; want 10ms, 10ms, %d", w, g.wait, g.admit, gateScale/2)
	}
	cpu.wait.Store(0)
	g.read(&mu, time.Millisecond)
	if g.wait != 0 || g.admit != gateScale/2+gateRecover {
		t.Fatalf("after no wait: kept %v, share %d; want 0, %d", g.wait, g.admit, gateScale/2+gateRecover)
	}
}

// The bound is the limiter's normal latency, never below minCPUWait.
func TestCPUBound(t *testing.T) {
	if b := cpuBound(0); b != minCPUWait {
		t.Errorf("bound without a baseline = %v, want %v", b, minCPUWait)
	}
	if b := cpuBound(int64(5 * time.Millisecond)); b != 5*time.Millisecond {
		t.Errorf("bound for a 5 ms baseline = %v", b)
	}
}
