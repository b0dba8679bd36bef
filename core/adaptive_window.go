package resilience

import (
	"time"

	"github.com/ylcnfrht/resilience/core/limit"
)

// The adaptive limiter's sampling window.
//
// Finished executions are summarised per sampling window (at least one
// mean round-trip time, a millisecond and ten samples, or the limit if
// smaller; at most a second; the first window closes after ten samples)
// and each window is handed to the limit.Algorithm, which returns the new
// limit; the limiter clamps it to [MinLimit, MaxLimit]. Windows rather
// than single samples keep the per-execution cost to a few additions under
// the lock the release takes anyway, and give the algorithms a mean that
// is far less noisy than one request's latency.
//
// Timing is sampled at high throughput. Reading the monotonic clock twice
// per execution would cost more than the rest of acquire and release
// together, so the limiter times every execution only until the current
// window has started 64 timed ones; after that it times one execution in
// 16, picked under the acquire lock by a fixed-seed pseudo-random sequence
// (reproducible, yet not in step with traffic that cycles through routes),
// and an untimed execution reads no clock at all. Each timed execution
// weighs the inverse of the chance it had to be timed (1 or 16) in the
// window's mean, and the choice is made before its latency exists, so the
// mean is an unbiased estimate of the mean over every execution in the
// window. Drops and the in-flight maximum are counted for every execution,
// timed or not; only a timed release can close a window, since only it
// holds a clock reading, and a window with samples closes only once it
// has timed ones. A service with fewer than 64 executions per window (in
// flight stays below 64, by Little's law) is timed in full, so the
// sampling applies only where the clock's cost matters. MinRTT is the
// minimum over timed executions. Executions that waited in the queue are
// always timed.

// denseTimed is the number of executions a window times in full before
// timing only one in sparseEvery.
const denseTimed = 64

// sparseEvery is the share of executions timed once a window has
// denseTimed: one in sparseEvery. It is a power of two so the pick is a
// mask.
const sparseEvery = 16

// maxWindow bounds a sampling window, so that a slow or quiet service
// still adapts about once a second.
const maxWindow = int64(time.Second)

// minWindow bounds a sampling window from below: updating the limit more
// often than every millisecond gains nothing and would put the algorithm
// on the hot path of very fast services.
const minWindow = int64(time.Millisecond)

// baseRTTRise is how fast the abandonment baseline follows latency up:
// 1/64 of itself per window, doubling in about 45 windows.
const baseRTTRise = 64

// windowMinSamples is the number of samples a window needs (or the limit,
// if smaller) before it may close.
const windowMinSamples = 10

// sampleWindow accumulates the executions finished since the last update.
type sampleWindow struct {
	start       int64 // clock offset at which the window opened
	length      int64 // the window closes after this long: the last mean RTT
	samples     int   // every execution counted as a sample, timed or not
	drops       int
	timed       int   // the samples among them that were timed
	rttSum      int64 // weighted sum of the timed samples' round-trip times
	rttWeight   int64 // sum of their weights
	minRTT      int64
	maxInFlight int
	started     int // timed executions started since the window opened
}

// timing decides whether the execution being admitted is timed and
// returns its weight: 1 while the window has fewer than denseTimed timed
// executions, then sparseEvery for one execution in sparseEvery, and 0
// (untimed) for the rest. pick is the limiter's xorshift state; the
// engine's lock must be held.
func (w *sampleWindow) timing(pick *uint64) int64 {
	if w.started < denseTimed {
		w.started++
		return 1
	}
	x := *pick
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*pick = x
	if x>>60&(sparseEvery-1) == 0 { // the top bits are the best mixed
		return sparseEvery
	}
	return 0
}

// record counts one finished execution of outcome o (LimitSampled or
// LimitDropped) of the given weight in drops, started at start (a clock
// offset; only for a timed one, timedWeight > 0) and ended at now, with
// inFlight permits held when it ended.
func (w *sampleWindow) record(o LimitOutcome, weight, start, timedWeight, now int64, inFlight int) {
	if o == LimitDropped {
		w.drops += int(weight)
	} else {
		w.samples++
		if timedWeight > 0 {
			rtt := max(now-start, 0)
			w.timed++
			w.rttSum += rtt * timedWeight
			w.rttWeight += timedWeight
			if w.minRTT == 0 || rtt < w.minRTT {
				w.minRTT = rtt
			}
		}
	}
	if inFlight > w.maxInFlight {
		w.maxInFlight = inFlight
	}
}

// closes reports whether a timed release at now closes the window: it has
// lasted maxWindow, or it holds enough outcomes (timed ones among them)
// and has lasted its length. A window with samples but none timed has no
// mean yet and stays open.
func (w *sampleWindow) closes(now int64, limit int) bool {
	if w.samples > 0 && w.timed == 0 {
		return false
	}
	elapsed := now - w.start
	if elapsed >= maxWindow {
		return true
	}
	n := w.samples + w.drops
	return n >= min(windowMinSamples, limit) && w.timed >= min(windowMinSamples, w.samples) && elapsed >= w.length
}

// sample returns the window as the algorithm reads it, for a limiter whose
// unrounded limit is estimate; its RTT is the weighted mean, 0 without
// samples.
func (w *sampleWindow) sample(estimate float64, minLimit, maxLimit int, cpuWait time.Duration) limit.Sample {
	s := limit.Sample{
		Limit:    estimate,
		MinLimit: minLimit,
		MaxLimit: maxLimit,
		InFlight: w.maxInFlight,
		Samples:  w.samples,
		Drops:    w.drops,
		MinRTT:   time.Duration(w.minRTT),
		CPUWait:  cpuWait,
	}
	if w.samples > 0 {
		s.RTT = time.Duration(w.rttSum / w.rttWeight)
	}
	return s
}

// next returns the window that follows w, opened at now: it lasts the
// mean RTT of w (within [minWindow, maxWindow]), or as long as w if w had
// no samples.
func (w *sampleWindow) next(now int64, rtt time.Duration) sampleWindow {
	length := w.length
	if w.samples > 0 {
		length = min(max(int64(rtt), minWindow), maxWindow)
	}
	return sampleWindow{start: now, length: max(length, minWindow)}
}

// nextBaseRTT returns the abandonment baseline after a window whose mean
// RTT was rtt: it falls at once to a lower mean and rises by 1/baseRTTRise
// of itself (at least 1 ns, at most to rtt) otherwise. The first window's
// mean sets it (base 0).
func nextBaseRTT(base, rtt int64) int64 {
	if base == 0 || rtt < base {
		return rtt
	}
	return min(base+max(base/baseRTTRise, 1), rtt)
}
