package limit

import (
	"math"
	"testing"
	"time"
)

// gradient2Feed calls Update on a fresh default Gradient2 once per window,
// with the service using its whole limit, the RTT at 10 ms up to window
// congestAt (counting from 1) and at 20 ms from then on. It returns the
// limit after each window.
func gradient2Feed(t *testing.T, congestAt, windows int) []float64 {
	t.Helper()
	g, err := NewGradient2(Gradient2Options{})
	if err != nil {
		t.Fatal(err)
	}
	limit := 20.0
	var out []float64
	for w := 1; w <= windows; w++ {
		rtt := 10 * time.Millisecond
		if w >= congestAt {
			rtt = 20 * time.Millisecond
		}
		limit = g.Update(Sample{Limit: limit, MinLimit: 1, MaxLimit: 1000, RTT: rtt, MinRTT: rtt,
			InFlight: int(limit), Samples: 50})
		out = append(out, limit)
	}
	return out
}

// Invariant: the first window past slow start corrects the overshoot in
// full (limit * gradient + queue size, no smoothing), whichever window of
// the double-then-hold cycle congestion first shows in. It used to be
// smoothed when congestion followed a doubling, leaving the limit far
// above the knee for many windows.
func TestGradient2FullCorrectionAfterSlowStartBothParities(t *testing.T) {
	// Baseline 10 ms, RTT 20 ms: gradient = 1.05 * 10 / 20 = 0.525.
	for _, c := range []struct {
		congestAt int
		before    float64 // limit in force in the first congested window
	}{
		{2, 40}, // right after a doubling (20 → 40)
		{3, 40}, // after the hold window
		{4, 80}, // right after the next doubling
		{5, 80},
	} {
		got := gradient2Feed(t, c.congestAt, c.congestAt+2)
		if prev := got[c.congestAt-2]; prev != c.before {
			t.Fatalf("congestion at window %d: limit before = %v, want %v (%v)", c.congestAt, prev, c.before, got)
		}
		want := c.before*0.525 + 4
		if first := got[c.congestAt-1]; math.Abs(first-want) > 1e-9 {
			t.Errorf("congestion at window %d: %v → %v, want the full correction to %v (%v)",
				c.congestAt, c.before, first, want, got)
		}
		// Only the first correction is full; the next is smoothed.
		prev := got[c.congestAt-1]
		smoothed := prev*(1-defaultGradient2Smoothing) + (prev*0.525+4)*defaultGradient2Smoothing
		if next := got[c.congestAt]; math.Abs(next-smoothed) > 1e-9 {
			t.Errorf("congestion at window %d: second correction %v → %v, want smoothed %v", c.congestAt, prev, next, smoothed)
		}
	}
}

// Invariant: when a drop ends slow start, the drop backs off and the next
// window with samples is the first past slow start: a congested one
// corrects in full, once.
func TestGradient2FullCorrectionAfterDropEndsSlowStart(t *testing.T) {
	for _, doublings := range []int{1, 2} { // skip set or clear at the drop
		g, err := NewGradient2(Gradient2Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := Sample{Limit: 20, MinLimit: 1, MaxLimit: 1000, RTT: 10 * time.Millisecond, Samples: 50}
		for range doublings + 1 {
			s.InFlight = int(s.Limit)
			s.Limit = g.Update(s)
		}
		s.Drops = 1
		s.Limit = g.Update(s)
		s.Drops = 0
		s.RTT = 20 * time.Millisecond
		before := s.Limit
		s.InFlight = int(s.Limit)
		got := g.Update(s)
		if want := before*0.525 + 4; math.Abs(got-want) > 1e-9 {
			t.Errorf("after %d doublings and a drop: %v → %v, want the full correction to %v", doublings, before, got, want)
		}
		s.Limit = got
		s.InFlight = int(got)
		if next, want := g.Update(s), got*(1-defaultGradient2Smoothing)+(got*0.525+4)*defaultGradient2Smoothing; math.Abs(next-want) > 1e-9 {
			t.Errorf("after %d doublings and a drop: second correction %v → %v, want smoothed %v", doublings, got, next, want)
		}
	}
}
