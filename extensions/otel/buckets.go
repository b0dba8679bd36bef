package resilienceotel

import (
	"slices"
	"time"
)

// DefaultQueueWaitBuckets are the bounds of resilience.queue.wait, in
// seconds, when Options.QueueWaitBuckets is nil. Waits that end in a queue
// timeout last the timeout and a little more, so each common queue timeout
// (10, 25, 50, 100, 250 and 500 ms, 1 s) has a bound at it and one 5 %
// above it: when the timer fires on time such a wait falls in that narrow
// bucket and a quantile read from it is within 5 % of the truth, where a
// bucket running on to the next round number would read up to 2.5 × the
// wait. (On a loaded machine a late timer's waits land in the next
// bucket.)
var DefaultQueueWaitBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.0105, 0.025, 0.02625, 0.05, 0.0525,
	0.1, 0.105, 0.25, 0.2625, 0.5, 0.525, 1, 1.05, 2.5, 5, 10,
}

// QueueWaitBuckets returns bucket bounds for resilience.queue.wait (as
// Options.QueueWaitBuckets) around one queue timeout: fractions of it for
// the waits that got a permit, and bounds at 1, 1.05 and 1.25 times it for
// those that timed out, so quantiles of either kind stay within a few
// per cent of the wait. A timeout of 0 or less gives
// DefaultQueueWaitBuckets.
func QueueWaitBuckets(queueTimeout time.Duration) []float64 {
	if queueTimeout <= 0 {
		return slices.Clone(DefaultQueueWaitBuckets)
	}
	t := queueTimeout.Seconds()
	fractions := []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1, 1.05, 1.25, 2}
	out := make([]float64, len(fractions))
	for i, f := range fractions {
		out[i] = t * f
	}
	return out
}
