package limit

import "math"

// kneeSearch keeps Gradient2's limit at the knee, the most executions the
// service runs without a queue inside it. It is a state machine with one
// window per step; the phases and their transitions (see update, search):
//
//	any ---- app-limited window -------------------------------> cruise
//	any but the probes up -- congested mildly kneeCongested
//	                         windows in a row -----------------> hold (limit: Little's-law knee)
//	any but the probes up -- congested otherwise --------------> cruise (proportional correction)
//	hold ---- next window -------------------------------------> cruise
//	cruise -- kneeCruise-1 windows measured: known not to queue -> peek (limit +1)
//	                                         otherwise ---------> downSettle (limit -1)
//	peek ----------------------------------> upJudge (limit back to from)
//	upJudge - kneeMeasure windows, then: kept, growing --------> peek (step ×2; limit from+step)
//	                                     kept, grown enough ---> upJudge (step ×2; held while judged)
//	                                     kept, narrowing ------> peek (step ÷2), or rest once under 1
//	                                     rejected, queued even
//	                                     at its fastest --------> downSettle (limit from -1)
//	                                     rejected, step >= 2 --> repeekSettle (step ÷2; limit from)
//	                                     rejected, step 1 -----> rest (limit from)
//	repeekSettle ---------------------------> repeek -> peek (limit from+step)
//	downSettle -----------------------------> downJudge
//	downJudge - faster: kept ---------------> downSettle (step ×2)
//	            no faster ------------------> rest (limit from; its RTT is the clean one)
//	rest -----------------------------------> cruise
//
// A move of the limit is judged by comparing window mean RTTs before and
// after it, so the baseline's error (it is a drift-protected, low-biased
// average) does not enter the decision, only the noise between windows,
// which the cruise measures where nothing queues. The zero value starts
// in cruise with nothing known.
type kneeSearch struct {
	phase phase
	// valid: the limit in force is known not to queue (a probe up to it
	// did not raise latency, or a probe below it did not lower latency).
	valid bool
	// clean is the mean RTT at the last limit known not to queue: the
	// no-queue latency the Little's-law knee divides by (0 unknown).
	clean float64
	noise float64 // mean relative RTT change between cruise windows
	over  int     // mildly congested windows in a row, with the limit in use
	prev  float64 // the limit of the previous window

	// The windows measured in this phase: in cruise, their count, sum and
	// the previous one (for the noise); judging a probe up, their count,
	// the slowest (in sum) and the fastest.
	n    int
	sum  float64
	last float64
	low  float64

	// The probe: the limit it started from, its size in permits, the RTT
	// it is judged against, the probes up kept in a row, and whether a
	// rejected one is narrowing the knee down.
	from, step, ref float64
	kept            int
	bisect          bool
}

// phase is the knee search's state; see kneeSearch.
type phase uint8

const (
	// phaseCruise holds the limit and measures kneeCruise-1 windows at it,
	// then probes it.
	phaseCruise phase = iota
	// phaseRest lets the window after the limit returned to one known not
	// to queue pass unmeasured (it still measures the limit before).
	phaseRest
	// phaseHold lets the window after the jump to the Little's-law knee
	// pass, congested or not.
	phaseHold
	// phasePeek: a probe up's permits are in force for this one window;
	// then the limit returns to from while the executions they admitted
	// are measured.
	phasePeek
	// phaseUpJudge measures a probe up on kneeMeasure windows and keeps or
	// rejects it.
	phaseUpJudge
	// phaseRepeekSettle and phaseRepeek are the two windows at from after
	// a rejected probe up, before a peek half as far.
	phaseRepeekSettle
	phaseRepeek
	// phaseDownSettle lets the window after a probe down pass;
	// phaseDownJudge keeps or rejects the probe on the next one.
	phaseDownSettle
	phaseDownJudge
)

var phaseNames = [...]string{"cruise", "rest", "hold", "peek", "upJudge", "repeekSettle", "repeek", "downSettle", "downJudge"}

func (p phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "phase(?)"
}

// probingUp reports whether a probe up is under way: its windows are
// judged by the probe, congested or not, since a probe up that congests
// is a probe rejected, not an overload to correct.
func (p phase) probingUp() bool {
	return p == phasePeek || p == phaseUpJudge || p == phaseRepeekSettle || p == phaseRepeek
}

const (
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

// update is one window of the search. It returns the next limit, or
// correct true when the window is congested and no standing queue has
// shown yet: Gradient2 then applies its proportional correction. rtt is
// the window's mean RTT, gradient Gradient2's, base the baseline RTT.
func (k *kneeSearch) update(s Sample, rtt, gradient, base float64) (limit float64, correct bool) {
	prev := k.prev
	k.prev = s.Limit
	if prev == 0 {
		prev = s.Limit
	}
	switch {
	case gradient == 1 && float64(s.InFlight)*2 < s.Limit:
		// App-limited: no evidence for a higher limit, nor for this one.
		k.restart(false)
		return s.Limit, false
	case k.phase == phaseHold:
		k.phase = phaseCruise
		return s.Limit, false
	case gradient < 1 && !k.phase.probingUp():
		return k.congested(s, rtt, gradient, base, prev)
	}
	k.over = 0
	return k.search(s, rtt), false
}

// congested counts a congested window. Little's law gives the knee only
// while the limit is in use: an app-limited window (in flight below half
// the limit) says nothing about it.
func (k *kneeSearch) congested(s Sample, rtt, gradient, base, prev float64) (float64, bool) {
	if gradient >= kneeGradient && float64(s.InFlight)*2 >= s.Limit {
		k.over++
	} else {
		k.over = 0
	}
	if k.over < kneeCongested {
		k.restart(false)
		return 0, true
	}
	// The queue stands: go to the knee, the concurrency that the window's
	// throughput needs without waiting (limit × no-queue RTT / RTT),
	// judged from the limit in force when the measured executions were
	// admitted.
	clean := k.clean
	if clean == 0 || clean > rtt {
		clean = base
	}
	k.restart(false)
	k.phase = phaseHold
	return min(s.Limit, prev) * clean / rtt, false
}

// restart ends a probe and starts a cruise; valid says whether the limit
// in force is known not to queue. What was learnt of the service (the
// noise, the no-queue RTT) and the window counters of update are kept.
func (k *kneeSearch) restart(valid bool) {
	*k = kneeSearch{valid: valid, noise: k.noise, clean: k.clean, prev: k.prev, over: k.over}
}

// search moves the limit in a window within the tolerance, or in any
// window of a probe up.
func (k *kneeSearch) search(s Sample, rtt float64) float64 {
	switch k.phase {
	case phaseRest:
		k.phase = phaseCruise
	case phaseDownSettle:
		k.phase = phaseDownJudge
	case phaseRepeekSettle:
		k.phase = phaseRepeek
	case phaseRepeek:
		k.phase = phasePeek
		return k.from + k.step
	case phasePeek:
		k.phase = phaseUpJudge
		return k.from
	case phaseUpJudge:
		return k.judgeUp(s, rtt)
	case phaseDownJudge:
		return k.judgeDown(s, rtt)
	case phaseCruise:
		return k.cruise(s, rtt)
	}
	return s.Limit
}

// rise and fall are the least relative changes of the mean RTT that count
// as a probe's effect: above the floors and kneeNoise times the noise.
func (k *kneeSearch) rise() float64 { return max(kneeRise, kneeNoise*k.noise) }
func (k *kneeSearch) fall() float64 { return max(kneeFall, kneeNoise*k.noise) }

// cruise measures a window at a held limit and, after kneeCruise-1 of
// them, starts a probe: up, for one window, from a limit known not to
// queue; down otherwise.
func (k *kneeSearch) cruise(s Sample, rtt float64) float64 {
	rise := k.rise() // before this window enters the noise
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
	k.from, k.step = s.Limit, 1
	if !k.valid && k.clean > 0 && k.ref <= k.clean*(1+rise) {
		k.valid = true // as fast as at the last limit known not to queue
	}
	if k.valid {
		// At the knee a probe up costs the executions it admits beyond it
		// their wait for the service: it lasts one window, then the limit
		// returns while they are measured.
		k.clean = k.ref
		k.phase = phasePeek
		return s.Limit + k.step
	}
	k.phase = phaseDownSettle
	return max(s.Limit-k.step, float64(s.MinLimit))
}

// judgeUp measures a window of a probe up and, after kneeMeasure of them,
// keeps or rejects it on the slowest: an execution the probe admitted may
// wait for the service and finish a window late.
func (k *kneeSearch) judgeUp(s Sample, rtt float64) float64 {
	k.sum = max(k.sum, rtt)
	if k.n == 0 || rtt < k.low {
		k.low = rtt
	}
	k.n++
	if k.n < kneeMeasure {
		return s.Limit
	}
	slowest := k.sum
	k.sum, k.n = 0, 0
	if slowest <= k.ref*(1+k.rise()) {
		return k.keepUp(slowest)
	}
	return k.rejectUp(s)
}

// keepUp keeps a probe up that did not raise latency: the limit it
// reached is known not to queue. The next probe goes twice as far while
// there is room, or half as far while narrowing the knee down; after
// kneePeeks kept in a row the service has room above and the next ones
// hold their limit while judged, to grow as fast as slow start.
func (k *kneeSearch) keepUp(rtt float64) float64 {
	k.valid = true
	next := k.from + k.step
	k.ref = min(k.ref, rtt)
	if k.bisect {
		k.step /= 2
		if k.step < 1 {
			k.restart(true)
			k.phase = phaseRest
			return next // the knee, to the permit
		}
	} else {
		k.step *= 2
		k.kept++
	}
	k.from = next
	if k.bisect || k.kept < kneePeeks {
		k.phase = phasePeek
	} else {
		k.phase = phaseUpJudge
	}
	return next + k.step
}

// rejectUp rejects a probe up that raised latency: the limit returns to
// where the probe started, and the knee is searched below the probe.
func (k *kneeSearch) rejectUp(s Sample) float64 {
	from := k.from
	if k.clean > 0 && k.low > k.clean*(1+k.rise()) {
		// Even the fastest window queued: the limit the probe started
		// from is above the knee itself. Probe down from it.
		k.phase, k.bisect = phaseDownSettle, false
		k.valid, k.step, k.ref = false, 1, k.low
		return max(from-k.step, float64(s.MinLimit))
	}
	if k.step >= 2 {
		// The knee is between from and from + step: peek half as far once
		// the probe's executions are gone.
		k.step /= 2
		k.bisect = true
		k.phase = phaseRepeekSettle
		return from
	}
	k.restart(true)
	k.phase = phaseRest
	return from
}

// judgeDown keeps a probe down that lowered latency and probes twice as
// far below; a probe that did not returns to the limit above it, which
// did not queue measurably, and takes its RTT as the no-queue latency.
func (k *kneeSearch) judgeDown(s Sample, rtt float64) float64 {
	if rtt < k.ref*(1-k.fall()) {
		k.from, k.ref = s.Limit, rtt
		k.step *= 2
		k.phase = phaseDownSettle
		return max(s.Limit-k.step, float64(s.MinLimit))
	}
	from := k.from
	k.restart(true)
	k.clean = rtt
	k.phase = phaseRest
	return from
}
