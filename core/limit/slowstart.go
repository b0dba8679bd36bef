package limit

// slowStart doubles the limit every other window while latency stays flat,
// and ends for good at the first sign of queueing or a drop. Every other
// window, because the window right after an increase still measures
// executions admitted under the old limit.
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
	return s.Limit * 2, true
}
