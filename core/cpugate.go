package resilience

import (
	"math"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// cpuGate is the adaptive limiter's CPU gate (see AdaptiveLimiter): while
// the process's goroutines wait longer for a CPU than the limiter's
// normal latency, it admits only a share of the executions that find a
// permit free, so a CPU-bound service whose run queue no permit shows
// still sheds.
//
// Its fields are guarded by the limiter's lock, except that cpu is read,
// and the share computed, by one reading at a time (the limiter's updating
// flag), outside the lock.
type cpuGate struct {
	cpu      cpuReader     // nil: the gate is off (IgnoreCPUWait, or a runtime without the metrics)
	lastRead int64         // clock offset of the last reading
	wait     time.Duration // the last reading, for limit.Sample.CPUWait
	// admit is the share of executions admitted with a permit free, in
	// 1/gateScale (gateScale: all); credit accumulates it, so the refused
	// ones are spread evenly.
	admit, credit uint32
}

// gateScale is the CPU gate's unit: admit = gateScale lets every
// execution in.
const gateScale = 1 << 16

const (
	gateMin      = gateScale / 16 // the gate never admits less than this share
	gateRecover  = gateScale / 32 // growth per reading within the bound
	cpuReadEvery = int64(10 * time.Millisecond)
)

// minCPUWait is the CPU wait below which the CPU gate never closes: Go's
// scheduler lets a goroutine run 10 ms before preempting it, so waits of
// a millisecond are ordinary on a busy process.
const minCPUWait = time.Millisecond

// newCPUGate returns a gate that admits everything and reads the
// process's CPU wait, or that never reads it when off.
func newCPUGate(off bool) cpuGate {
	g := cpuGate{admit: gateScale}
	if !off {
		if w := newCPUWait(); w != nil { // nil: a runtime without the metrics
			g.cpu = w
		}
	}
	return g
}

// admitLocked reports whether the gate lets in an execution that found a
// permit free: always while the CPU keeps up, otherwise the gate's share
// of them, evenly spread.
func (g *cpuGate) admitLocked() bool {
	if g.admit >= gateScale {
		return true
	}
	g.credit += g.admit
	if g.credit < gateScale {
		return false
	}
	g.credit -= gateScale
	return true
}

// dueLocked reports whether a reading is due at now (at most one every
// cpuReadEvery) and, if so, takes it as started.
func (g *cpuGate) dueLocked(now int64) bool {
	if g.cpu == nil || now-g.lastRead < cpuReadEvery {
		return false
	}
	g.lastRead = now
	return true
}

// cpuBound is the CPU wait over which the gate narrows, for a limiter whose
// normal latency is baseRTT: that latency, and at least minCPUWait.
func cpuBound(baseRTT int64) time.Duration {
	return time.Duration(max(baseRTT, int64(minCPUWait)))
}

// read reads the CPU wait (runtime metrics, a few microseconds), off every
// request's path: how long a goroutine made runnable now can expect to
// wait for a CPU, from the scheduling since the last reading and the run
// queue now (see cpuWait.read). A reading over bound narrows the gate, one
// within it widens it (see nextShare); mu, the limiter's lock, is taken to
// apply the new share. It returns the reading. Only one read runs at a
// time.
func (g *cpuGate) read(mu sync.Locker, bound time.Duration) time.Duration {
	wait := g.cpu.read(runtime.GOMAXPROCS(0))
	admit := nextShare(g.admit, wait, bound) // no lock: only read writes admit, under the lock
	mu.Lock()
	g.admit, g.wait = admit, wait
	mu.Unlock()
	return wait
}

// nextShare returns the gate's share after a reading of wait against
// bound, within [gateMin, gateScale]: over the bound it falls by a tenth,
// and by up to a half as the wait reaches ten times the bound (a long run
// queue drains fast, since a refused request costs little); within half
// the bound it grows by gateRecover, and by a quarter of that between half
// the bound and the bound, so that it settles just below the share the CPU
// can serve.
func nextShare(admit uint32, wait, bound time.Duration) uint32 {
	g := uint64(admit)
	switch {
	case wait > bound:
		// Keep 1 - wait/(20·bound) of the share, between 1/2 and 9/10.
		cut := min(uint64(wait)*gateScale/(20*uint64(bound)), gateScale/2)
		keep := min(gateScale-cut, gateScale*9/10)
		g = max(g*keep/gateScale, gateMin)
	case wait > bound/2:
		g = min(g+gateRecover/4, gateScale)
	default:
		g = min(g+gateRecover, gateScale)
	}
	return uint32(g)
}

const (
	// schedLatencies is the runtime's histogram of the time goroutines
	// spent runnable before they ran.
	schedLatencies = "/sched/latencies:seconds"
	// schedRunnable is the runtime's count of goroutines runnable now.
	schedRunnable = "/sched/goroutines/runnable:goroutines"
	// cpuTotal and cpuIdle are the CPU time the Ps had and the part of it
	// they spent idle, in seconds.
	cpuTotal = "/cpu/classes/total:cpu-seconds"
	cpuIdle  = "/cpu/classes/idle:cpu-seconds"
)

// cpuReader is what the CPU gate reads: a *cpuWait, or a stand-in in
// tests.
type cpuReader interface {
	read(procs int) time.Duration
}

// cpuWait measures how long the process's goroutines wait for a CPU: the
// queue a CPU-bound service builds in Go's scheduler, before any limiter
// sees the requests waiting in it. Not safe for concurrent use; the gate
// reads it from one update at a time.
type cpuWait struct {
	sample [4]metrics.Sample
	last   []uint64 // bucket counts at the previous read
	busy   float64  // CPU seconds the Ps were busy, at the previous read
	procs  int      // GOMAXPROCS at the previous read
}

func newCPUWait() *cpuWait {
	w := &cpuWait{sample: [4]metrics.Sample{{Name: schedLatencies}, {Name: schedRunnable}, {Name: cpuTotal}, {Name: cpuIdle}}}
	metrics.Read(w.sample[:])
	if w.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil // a runtime without the metric: nothing to add
	}
	w.last = append([]uint64(nil), w.sample[0].Value.Float64Histogram().Counts...)
	w.busy = w.busySeconds()
	return w
}

// busySeconds is the CPU time the Ps have spent busy so far, from the last
// metrics.Read; 0 on a runtime without the metrics.
func (w *cpuWait) busySeconds() float64 {
	if w.sample[2].Value.Kind() != metrics.KindFloat64 || w.sample[3].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return w.sample[2].Value.Float64() - w.sample[3].Value.Float64()
}

// read returns how long a goroutine made runnable now can expect to wait
// for a CPU, from what happened since the previous read: the longer of
// the mean wait of the goroutines scheduled since then (the histogram's
// growth; it lags, since a goroutine reports its wait only once it runs)
// and the run queue's drain time, which does not lag (see drainTime). Both
// are about 0 while the CPU keeps up.
func (w *cpuWait) read(procs int) time.Duration {
	metrics.Read(w.sample[:])
	h := w.sample[0].Value.Float64Histogram()
	mean, scheduled := meanWait(h.Buckets, h.Counts, w.last)
	busy := w.busySeconds()
	var runnable uint64
	if w.sample[1].Value.Kind() == metrics.KindUint64 {
		runnable = w.sample[1].Value.Uint64()
	}
	drain := drainTime(runnable, scheduled, busy-w.busy, max(w.procs, 1))
	w.busy, w.procs = busy, procs
	return max(mean, drain)
}

// drainTime is how long a run queue of runnable goroutines takes to drain
// on procs Ps, when scheduled goroutines used busy CPU seconds since the
// last read: each runnable one is taken to need the CPU time those used
// on average. 0 when nothing was scheduled (no estimate; the mean wait
// then speaks).
func drainTime(runnable, scheduled uint64, busy float64, procs int) time.Duration {
	if runnable == 0 || scheduled == 0 || busy <= 0 {
		return 0
	}
	return time.Duration(float64(runnable) * busy / float64(scheduled) / float64(procs) * float64(time.Second))
}

// meanWait returns the mean of the histogram's growth since last (each
// bucket taken at its midpoint, an open end at its finite bound) and the
// number of goroutines it grew by, and moves last to counts.
func meanWait(buckets []float64, counts, last []uint64) (time.Duration, uint64) {
	var n uint64
	var sum float64
	for i, c := range counts {
		d := c - last[i]
		last[i] = c
		if d == 0 {
			continue
		}
		lo, hi := buckets[i], buckets[i+1]
		mid := (lo + hi) / 2
		switch {
		case math.IsInf(lo, -1):
			mid = max(hi, 0)
		case math.IsInf(hi, 1):
			mid = lo
		}
		n += d
		sum += float64(d) * mid
	}
	if n == 0 {
		return 0, 0
	}
	return time.Duration(sum / float64(n) * float64(time.Second)), n
}
