package resilience

import (
	"math"
	"runtime/metrics"
	"time"
)

// schedLatencies is the runtime's histogram of the time goroutines spent
// runnable before they ran.
const schedLatencies = "/sched/latencies:seconds"

// cpuWait measures how long the process's goroutines waited for a CPU
// between two reads: the queue a CPU-bound service builds in Go's
// scheduler, before any limiter sees the requests waiting in it. Not safe
// for concurrent use; the adaptive limiter reads it from one update at a
// time.
type cpuWait struct {
	sample [1]metrics.Sample
	last   []uint64 // bucket counts at the previous read
}

func newCPUWait() *cpuWait {
	w := &cpuWait{sample: [1]metrics.Sample{{Name: schedLatencies}}}
	metrics.Read(w.sample[:])
	if w.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil // a runtime without the metric: nothing to add
	}
	w.last = append([]uint64(nil), w.sample[0].Value.Float64Histogram().Counts...)
	return w
}

// read returns the mean wait of the goroutines scheduled since the last
// read, 0 if none were.
func (w *cpuWait) read() time.Duration {
	metrics.Read(w.sample[:])
	h := w.sample[0].Value.Float64Histogram()
	return meanWait(h.Buckets, h.Counts, w.last)
}

// meanWait returns the mean of the histogram's growth since last (each
// bucket taken at its midpoint, an open end at its finite bound) and moves
// last to counts.
func meanWait(buckets []float64, counts, last []uint64) time.Duration {
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
		return 0
	}
	return time.Duration(sum / float64(n) * float64(time.Second))
}
