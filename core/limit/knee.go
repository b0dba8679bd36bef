package limit

import "math"

// kneeSearch holds Gradient2's limit at the knee once latency is within
// the tolerance (see Gradient2, "Settling at the knee"). It judges a move
// of the limit by comparing window mean RTTs before and after it, so the
// baseline's error (it is a drift-protected, low-biased average) does not
// enter the decision, only the noise between windows, which it measures
// where nothing queues.
type kneeSearch struct {
	probe int  // 0 holding (cruise), probeUp or probeDown
	skip  bool // the limit just moved: this window still measures the old one
	// valid: the limit in force is known not to queue (a probe up to it
	// did not raise latency, or a probe below it did not lower latency).
	valid bool
	n     int     // cruise windows measured at this limit
	sum   float64 // their RTTs
	last  float64 // the previous cruise window's RTT, for the noise
	noise float64 // mean relative RTT change between cruise windows
	ref   float64 // the RTT the probe is judged against
	from  float64 // the limit before the probe
	step  float64 // the probe's size, in permits
	// clean is the mean RTT at the last limit known not to queue: the
	// no-queue latency the Little's-law estimate divides by (0 unknown).
	clean  float64
	over   int     // consecutive congested windows
	prev   float64 // the limit of the previous window
	hold   bool    // the limit was just set to the knee; let one window pass
	peek   bool    // a probe up is in force for one window, then reverts
	kept   int     // probes up kept in a row
	peeked bool    // the probe being measured was a peek
	bisect bool    // a probe up was rejected: narrowing the knee down
	again  bool    // peek again after this window
	low    float64 // the fastest window of a probe's measurement
}

const (
	probeUp   = 1
	probeDown = -1
	// kneeCruise is the number of windows the limit holds between probes
	// (the first one after a move is not measured).
	kneeCruise = 4
	// kneeMeasure is the number of windows a probe is judged on: an
	// execution it admitted may wait for the service and finish a window
	// late.
	kneeMeasure = 2
	// kneePeeks is the number of probes up in a row that last one window
	// each; once as many were kept, the service has room above and the
	// next ones hold their limit while they are judged, to grow faster.
	kneePeeks = 2
	// kneeGradient and kneeCongested: after kneeCongested windows in a row
	// congested only mildly (gradient at least kneeGradient, as at the
	// proportional correction's settling point), the queue stands and the
	// limit goes to the Little's-law knee. Farther above the knee, and for
	// the first windows, the proportional correction brings the limit
	// down: it is fast, and a burst that congests a window is no standing
	// queue.
	kneeGradient  = 0.8
	kneeCongested = 3
	// kneeRise and kneeFall are the least relative changes of the mean RTT
	// that count as a probe's effect, whatever the noise: a rise of 0.5 %
	// rejects a probe up, a fall of 0.25 % keeps a probe down. Above them,
	// kneeNoise times the measured noise between windows counts.
	kneeRise  = 0.005
	kneeFall  = 0.0025
	kneeNoise = 3
	// kneeNoiseStart is the noise assumed before any was measured, and
	// kneeNoiseWindows the time constant, in windows, of its average.
	kneeNoiseStart   = 0.003
	kneeNoiseWindows = 5
)

// reset ends a probe and restarts the cruise; valid says whether the
// limit in force is known not to queue. The noise and the no-queue RTT
// are kept.
func (k *kneeSearch) reset(valid bool) {
	*k = kneeSearch{valid: valid, noise: k.noise, clean: k.clean, prev: k.prev, over: k.over}
}

// search moves the limit while latency is within the tolerance: it holds
// for kneeCruise windows, then probes down if the limit is not known to be
// free of queueing, up otherwise, and keeps a probe only if latency
// answered it as a limit below the knee does: not rising when the limit
// rose, falling when it fell.
func (k *kneeSearch) search(s Sample, rtt float64) float64 {
	if k.skip {
		k.skip = false
		return s.Limit
	}
	if k.again {
		k.again, k.peek = false, true
		return k.from + k.step
	}
	if k.peek {
		// The window with the probe's permits is over: back to the limit
		// while the executions they admitted finish and are measured,
		// from the next window on.
		k.peek, k.peeked = false, true
		return k.from
	}
	rise := max(kneeRise, kneeNoise*k.noise)
	fall := max(kneeFall, kneeNoise*k.noise)
	if k.peeked || k.probe == probeUp {
		// An execution admitted by the probe may wait for the service and
		// finish a window late: the probe is judged on the slowest of
		// kneeMeasure windows.
		k.sum = max(k.sum, rtt)
		if k.n == 0 || rtt < k.low {
			k.low = rtt
		}
		k.n++
		if k.n < kneeMeasure {
			return s.Limit
		}
		rtt = k.sum
		k.sum, k.n, k.peeked = 0, 0, false
	}
	switch k.probe {
	case probeUp:
		if rtt <= k.ref*(1+rise) {
			// Not queueing: keep it. Probe twice as far while there is
			// room, or half as far while narrowing the knee down.
			k.valid = true
			next := k.from + k.step
			k.ref = min(k.ref, rtt)
			if k.bisect {
				k.step /= 2
				if k.step < 1 {
					k.reset(true)
					k.skip = true
					return next
				}
			} else {
				k.step *= 2
				k.kept++
			}
			k.from, k.peek = next, k.bisect || k.kept < kneePeeks
			return next + k.step
		}
		from := k.from
		if k.clean > 0 && k.low > k.clean*(1+rise) {
			// Even the fastest window queued: the limit the probe started
			// from is above the knee itself. Probe down from it.
			k.probe, k.bisect, k.again = probeDown, false, false
			k.valid, k.step, k.ref, k.skip = false, 1, k.low, true
			return max(from-k.step, float64(s.MinLimit))
		}
		if k.step >= 2 {
			// The knee is between from and from + step: halve the step and
			// peek again once the probe's executions are gone.
			k.step /= 2
			k.bisect, k.again, k.skip = true, true, true
			return from
		}
		k.reset(true)
		k.skip = true
		return from
	case probeDown:
		if rtt < k.ref*(1-fall) {
			// The lower limit queued less: keep it and go on down, twice
			// as far.
			k.from, k.ref, k.skip = s.Limit, rtt, true
			k.step *= 2
			return max(s.Limit-k.step, float64(s.MinLimit))
		}
		// No better: the limit above did not queue measurably, and this
		// is its latency without a queue.
		from := k.from
		k.reset(true)
		k.clean = rtt
		k.skip = true
		return from
	}
	if k.valid && k.last > 0 {
		// The noise between windows, measured where nothing queues. A
		// change is counted as at most twice the noise so far: one slow
		// window (a collection, a busy machine) raises it a fifth, not
		// tenfold, and steady noise is followed within a few windows.
		d := min(math.Abs(rtt-k.last)/rtt, 2*k.noise)
		k.noise += (d - k.noise) / kneeNoiseWindows
	}
	k.last = rtt
	k.sum += rtt
	k.n++
	if k.valid && k.clean > 0 && rtt > k.clean*(1+rise) {
		k.valid = false // latency rose at this limit: the knee moved down
	}
	if k.n < kneeCruise-1 {
		return s.Limit
	}
	k.ref = k.sum / float64(k.n)
	k.n, k.sum, k.last = 0, 0, 0
	k.from, k.skip, k.step = s.Limit, true, 1
	if !k.valid && k.clean > 0 && k.ref <= k.clean*(1+rise) {
		k.valid = true // as fast as at the last limit known not to queue
	}
	if k.valid {
		// At a limit known not to queue, a probe up costs the executions
		// it admits beyond the knee their wait for the service: it lasts
		// one window, then the limit returns while they are measured.
		k.clean = k.ref
		k.probe, k.peek, k.skip = probeUp, true, false
		return s.Limit + k.step
	}
	k.probe = probeDown
	return max(s.Limit-k.step, float64(s.MinLimit))
}
