package resilience

import (
	"math"
	"runtime/metrics"
	"time"
)

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

// cpuReader is what the adaptive limiter's CPU gate reads: a *cpuWait,
// or a stand-in in tests.
type cpuReader interface {
	read(procs int) time.Duration
}

// cpuWait measures how long the process's goroutines wait for a CPU: the
// queue a CPU-bound service builds in Go's scheduler, before any limiter
// sees the requests waiting in it. Not safe for concurrent use; the
// adaptive limiter reads it from one update at a time.
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
