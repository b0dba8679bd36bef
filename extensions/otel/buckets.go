package resilienceotel

import (
	"slices"
	"time"
)

// Bucket bounds are exact decimals: each is computed in whole
// microseconds and divided once, so the float64 is the one nearest the
// decimal and the Prometheus exporter's le label reads as that decimal
// ("0.0025", never "0.0025000000000000005"). Equal labels across services
// are what le= selectors and sums over a fleet need.

// DefaultDurationBuckets are the bounds of resilience.execution.duration
// and resilience.attempt.duration, in seconds, when
// Options.DurationBuckets is nil: 1, 2.5 and 5 in each decade from 100 µs
// to 10 s, DurationBuckets(100*time.Microsecond, 10*time.Second).
var DefaultDurationBuckets = DurationBuckets(100*time.Microsecond, 10*time.Second)

// DefaultQueueWaitBuckets are the bounds of resilience.queue.wait, in
// seconds, when Options.QueueWaitBuckets is nil: DefaultDurationBuckets,
// and one bound 5 % above each common queue timeout (10, 25, 50, 100, 250
// and 500 ms, 1 s). Waits that end in a queue timeout last the timeout and
// a little more; when the timer fires on time such a wait falls in that
// narrow bucket and a quantile read from it is within 5 % of the truth,
// where a bucket running on to the next round number would read up to
// 2.5 × the wait. (On a loaded machine a late timer's waits land in the
// next bucket.)
var DefaultQueueWaitBuckets = merge(DefaultDurationBuckets,
	[]float64{0.0105, 0.02625, 0.0525, 0.105, 0.2625, 0.525, 1.05})

// DurationBuckets returns the bounds 1, 2.5 and 5 × 10ⁿ seconds from
// lowest to highest (both included when they are on that series), as
// exact decimals, for Options.DurationBuckets or to build
// Options.QueueWaitBuckets on. Use it to widen or narrow the default
// range; lowest is raised to 10 µs, and nil is returned when no bound is
// in the range.
func DurationBuckets(lowest, highest time.Duration) []float64 {
	lo := max(lowest.Microseconds(), 10)
	hi := highest.Microseconds()
	var out []float64
	for decade := int64(10); decade <= hi; decade *= 10 {
		for _, us := range [...]int64{decade, decade * 5 / 2, decade * 5} {
			if us >= lo && us <= hi {
				out = append(out, micros(us))
			}
		}
	}
	return out
}

// QueueWaitBuckets returns bucket bounds for resilience.queue.wait (as
// Options.QueueWaitBuckets) around one queue timeout: DefaultDurationBuckets
// for the waits that got a permit, with bounds at 0.5, 0.75, 0.9, 1, 1.05,
// 1.25 and 2 times the timeout added, so quantiles of waits near it, those
// that timed out included, stay within a few per cent. The added bounds
// are rounded to whole microseconds, exact decimals like the rest. A
// timeout of 0 or less gives DefaultQueueWaitBuckets.
func QueueWaitBuckets(queueTimeout time.Duration) []float64 {
	if queueTimeout <= 0 {
		return slices.Clone(DefaultQueueWaitBuckets)
	}
	t := queueTimeout.Microseconds()
	var near []float64
	for _, percent := range [...]int64{50, 75, 90, 100, 105, 125, 200} {
		if us := (t*percent + 50) / 100; us > 0 {
			near = append(near, micros(us))
		}
	}
	return merge(DefaultDurationBuckets, near)
}

// micros is us microseconds in seconds: one correctly rounded division,
// so the result is the float64 nearest the decimal.
func micros(us int64) float64 { return float64(us) / 1e6 }

// merge returns the sorted union of a and b, without duplicates.
func merge(a, b []float64) []float64 {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
