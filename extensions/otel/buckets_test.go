package resilienceotel

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestQueueWaitBuckets protects the quantiles of resilience.queue.wait: a
// wait that ends a little past a common queue timeout falls in a bucket
// no wider than 5 % of it, in the default bounds and in those built for
// one timeout.
func TestQueueWaitBuckets(t *testing.T) {
	check := func(name string, b []float64, timeouts ...float64) {
		if !slices.IsSorted(b) || len(slices.Compact(slices.Clone(b))) != len(b) {
			t.Errorf("%s: %v not strictly ascending", name, b)
		}
		for _, to := range timeouts {
			i, found := slices.BinarySearch(b, to)
			if !found || i+1 >= len(b) || b[i+1] > to*1.05+1e-12 {
				t.Errorf("%s: no bucket (%v, ≤ %v] for a wait just past the %v s timeout: %v", name, to, to*1.05, to, b)
			}
		}
	}
	check("DefaultQueueWaitBuckets", DefaultQueueWaitBuckets, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)
	check("QueueWaitBuckets(100ms)", QueueWaitBuckets(100*time.Millisecond), 0.1)
	check("QueueWaitBuckets(300ms)", QueueWaitBuckets(300*time.Millisecond), 0.3)
	if b := QueueWaitBuckets(0); !slices.Equal(b, DefaultQueueWaitBuckets) {
		t.Errorf("QueueWaitBuckets(0) = %v", b)
	}
}

// labels formats bounds as the Prometheus exposition writes le (shortest
// representation that reads back as the same float64).
func labels(b []float64) string {
	s := make([]string, len(b))
	for i, v := range b {
		s[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(s, " ")
}

// TestBucketsAreExactDecimals protects the le labels from float noise
// (0.0025000000000000005 for 0.1 × 0.025): the documented bounds, as they
// are written, and no bound of any timeout's QueueWaitBuckets with more
// than the six decimals of a whole microsecond.
func TestBucketsAreExactDecimals(t *testing.T) {
	for _, c := range []struct {
		name string
		got  []float64
		want string
	}{
		{"DefaultDurationBuckets", DefaultDurationBuckets,
			"0.0001 0.00025 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10"},
		{"DefaultQueueWaitBuckets", DefaultQueueWaitBuckets,
			"0.0001 0.00025 0.0005 0.001 0.0025 0.005 0.01 0.0105 0.025 0.02625 0.05 0.0525 0.1 0.105 0.25 0.2625 0.5 0.525 1 1.05 2.5 5 10"},
		{"QueueWaitBuckets(100ms)", QueueWaitBuckets(100 * time.Millisecond),
			"0.0001 0.00025 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.075 0.09 0.1 0.105 0.125 0.2 0.25 0.5 1 2.5 5 10"},
		{"QueueWaitBuckets(30ms)", QueueWaitBuckets(30 * time.Millisecond),
			"0.0001 0.00025 0.0005 0.001 0.0025 0.005 0.01 0.015 0.0225 0.025 0.027 0.03 0.0315 0.0375 0.05 0.06 0.1 0.25 0.5 1 2.5 5 10"},
		{"DurationBuckets(1ms, 1s)", DurationBuckets(time.Millisecond, time.Second),
			"0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1"},
		{"DurationBuckets(0, 100µs)", DurationBuckets(0, 100*time.Microsecond),
			"1e-05 2.5e-05 5e-05 0.0001"},
	} {
		if got := labels(c.got); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	if b := DurationBuckets(time.Second, time.Millisecond); b != nil {
		t.Errorf("DurationBuckets(1s, 1ms) = %v, want nil", b)
	}
	for us := int64(1); us <= 2_000_000; us = us*3 + 7 {
		for _, b := range QueueWaitBuckets(time.Duration(us) * time.Microsecond) {
			s := strconv.FormatFloat(b, 'f', -1, 64)
			if _, frac, _ := strings.Cut(s, "."); len(frac) > 6 {
				t.Fatalf("QueueWaitBuckets(%dµs) has the bound %s", us, s)
			}
		}
	}
}
