package limit

import "testing"

// Invariant: a slow-start step grows the limit to the demand the window
// closed on (in flight plus queued), at least twofold and at most
// fourfold; a window that measured an app-limited limit, or the one right
// after a step, holds it.
func TestSlowStartGrowsWithQueuedDemandAtMostFourfold(t *testing.T) {
	for _, c := range []struct {
		name             string
		limit            float64
		inFlight, queued int
		skip             bool
		want             float64
	}{
		{"no queue: doubles", 20, 20, 0, false, 40},
		{"short queue: doubles", 20, 20, 10, false, 40},
		{"demand 2.5 times the limit", 40, 40, 60, false, 100},
		{"demand far beyond: fourfold", 20, 20, 100, false, 80},
		{"app-limited: holds", 40, 19, 100, false, 40},
		{"right after a step: holds", 80, 80, 100, true, 80},
	} {
		t.Run(c.name, func(t *testing.T) {
			ss := slowStart{skip: c.skip}
			got, ok := ss.grow(Sample{Limit: c.limit, InFlight: c.inFlight, Queued: c.queued}, false)
			if !ok || got != c.want {
				t.Errorf("grow = %v, %v; want %v, true", got, ok, c.want)
			}
		})
	}
}
