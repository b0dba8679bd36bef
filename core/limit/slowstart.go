package limit

// slowStart doubles the limit every other window while latency stays flat,
// and ends for good at the first sign of queueing or a drop. Every other
// window, because the window right after an increase still measures
// executions admitted under the old limit. A step grows the limit up to
// fourfold when that much demand waits in the limiter's queue (see
// slowStartGrowth).
type slowStart struct {
	done bool
	skip bool // the last window doubled the limit; the next one holds it
	// ended is set when slow start ends; Gradient2 clears it at its first
	// correction after it, which it applies in full. A flag of its own:
	// skip may be in either state when congestion first shows, and which
	// one it is must not decide how hard the overshoot is corrected.
	ended bool
}

// end leaves slow start (a no-op once it is over).
func (ss *slowStart) end() {
	if !ss.done {
		ss.done = true
		ss.ended = true
	}
}

// grow reports the limit to use while in slow start, or false once slow
// start is over (the caller then applies its algorithm).
func (ss *slowStart) grow(s Sample, congested bool) (float64, bool) {
	if ss.done {
		return 0, false
	}
	if congested {
		ss.end()
		return 0, false
	}
	if ss.skip || float64(s.InFlight)*2 < s.Limit {
		ss.skip = false
		return s.Limit, true
	}
	ss.skip = true
	return s.Limit * slowStartGrowth(s), true
}

// maxSlowStartGrowth bounds one step of slow start: the limit grows to at
// most this many times the one the window's flat latency confirmed.
const maxSlowStartGrowth = 4

// slowStartGrowth is the factor one slow-start step multiplies the limit
// by: the demand the window closed on (in flight plus queued, over the
// limit), at least 2 and at most maxSlowStartGrowth. Without a queue, or
// with a short one, the limit doubles. A limit far below a demand that
// stands in the queue would otherwise take two windows per doubling to
// reach it, and a fair queue sheds every flow alike all the while (the
// lab's fair scenario lost 1 % of every quiet tenant's requests in its
// first second to limits 20 and 40; BENCHMARKS.md, fairness). The factor
// follows the demand rather than jumping to it: a queue far longer than
// the service's capacity must not be admitted into it at once.
func slowStartGrowth(s Sample) float64 {
	demand := float64(s.InFlight + s.Queued)
	return min(max(demand/s.Limit, 2), maxSlowStartGrowth)
}
