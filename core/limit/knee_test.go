package limit

import (
	"math"
	"testing"
	"time"
)

// kneeWindow is one scripted window of a knee-search table test: the
// window's mean RTT (the baseline is 10 ms) and what must follow.
type kneeWindow struct {
	rtt      float64 // ms
	inFlight int     // 0: the whole limit is in use
	phase    phase   // the phase after the window
	limit    float64 // the limit Update returns
}

// ms is a duration in milliseconds, as the float64 nanoseconds the search
// works in.
func ms(v float64) float64 { return v * float64(time.Millisecond) }

// Invariant: each transition of the knee search (see kneeSearch) goes to
// its phase with its limit. Every row starts Gradient2 in a phase, past
// slow start, with a baseline of 10 ms (Tolerance 1.05: congested above
// 10.5 ms) and a measured noise of 0.1 %, so a probe counts a rise of
// 0.5 % and a fall of 0.3 %; then it feeds scripted samples through
// Update and checks the phase and the limit after each.
func TestKneeSearchTransitions(t *testing.T) {
	// The proportional correction, smoothed, from a limit of 50.
	proportional := func(rtt float64) float64 {
		gradient := max(0.5, 1.05*10/rtt)
		return 50*(1-defaultGradient2Smoothing) + (50*gradient+4)*defaultGradient2Smoothing
	}
	cases := []struct {
		name  string
		start kneeSearch
		limit float64 // in force at the first window
		// windows are fed in order; after checks the state at the end.
		windows []kneeWindow
		after   func(t *testing.T, k kneeSearch)
	}{
		{
			name:    "any -> cruise: an app-limited window ends a probe and forgets that the limit was clean",
			start:   kneeSearch{phase: phaseUpJudge, valid: true, clean: ms(10), from: 50, step: 1, ref: ms(10), n: 1, sum: ms(10)},
			limit:   50,
			windows: []kneeWindow{{rtt: 10, inFlight: 10, phase: phaseCruise, limit: 50}},
			after:   wantValid(false),
		},
		{
			name:    "cruise -> cruise: a congested window, the first in a row, gets the proportional correction",
			start:   kneeSearch{phase: phaseCruise, valid: true, clean: ms(10)},
			limit:   50,
			windows: []kneeWindow{{rtt: 12, phase: phaseCruise, limit: proportional(12)}},
			after:   wantValid(false),
		},
		{
			name:    "downJudge -> cruise: congestion ends a probe down with the proportional correction",
			start:   kneeSearch{phase: phaseDownJudge, from: 51, step: 1, ref: ms(10)},
			limit:   50,
			windows: []kneeWindow{{rtt: 12, phase: phaseCruise, limit: proportional(12)}},
		},
		{
			name:    "cruise -> cruise: a strongly congested window restarts the count of mild ones",
			start:   kneeSearch{phase: phaseCruise, over: 2, prev: 50},
			limit:   50,
			windows: []kneeWindow{{rtt: 20, phase: phaseCruise, limit: proportional(20)}},
			after: func(t *testing.T, k kneeSearch) {
				if k.over != 0 {
					t.Errorf("over = %d, want 0", k.over)
				}
			},
		},
		{
			name:  "cruise -> hold: the third mildly congested window in a row goes to the Little's-law knee",
			start: kneeSearch{phase: phaseCruise, over: 2, prev: 50, clean: ms(10)},
			limit: 50,
			// 50 × 10 ms / 12.5 ms.
			windows: []kneeWindow{{rtt: 12.5, phase: phaseHold, limit: 40}},
		},
		{
			name:  "downSettle -> hold: the knee is taken from the limit in force when the window's executions were admitted",
			start: kneeSearch{phase: phaseDownSettle, over: 2, prev: 40, clean: ms(10), from: 51, step: 1},
			limit: 50,
			// min(50, 40) × 10 ms / 12.5 ms.
			windows: []kneeWindow{{rtt: 12.5, phase: phaseHold, limit: 32}},
		},
		{
			name:  "hold -> cruise: the window after the jump passes, congested or not; one more mild window jumps again",
			start: kneeSearch{phase: phaseHold, over: 3, prev: 50},
			limit: 40,
			windows: []kneeWindow{
				{rtt: 12.5, phase: phaseCruise, limit: 40},
				{rtt: 12.5, phase: phaseHold, limit: 32},
			},
		},
		{
			name:  "cruise -> peek: after three windows at a limit known not to queue, one permit up for one window",
			start: kneeSearch{phase: phaseCruise, valid: true, clean: ms(10)},
			limit: 50,
			windows: []kneeWindow{
				{rtt: 10, phase: phaseCruise, limit: 50},
				{rtt: 10, phase: phaseCruise, limit: 50},
				{rtt: 10, phase: phasePeek, limit: 51},
			},
		},
		{
			name:  "cruise -> downSettle: after three windows at a limit not known to be clean, one permit down",
			start: kneeSearch{phase: phaseCruise},
			limit: 50,
			windows: []kneeWindow{
				{rtt: 10, phase: phaseCruise, limit: 50},
				{rtt: 10, phase: phaseCruise, limit: 50},
				{rtt: 10, phase: phaseDownSettle, limit: 49},
			},
		},
		{
			name:  "cruise -> downSettle: latency rose above the clean RTT at a limit known not to queue",
			start: kneeSearch{phase: phaseCruise, valid: true, clean: ms(10)},
			limit: 50,
			windows: []kneeWindow{
				{rtt: 10, phase: phaseCruise, limit: 50},
				{rtt: 10.2, phase: phaseCruise, limit: 50},
				{rtt: 10, phase: phaseDownSettle, limit: 49},
			},
		},
		{
			name:  "cruise -> peek: a limit as fast as the last clean one is clean again",
			start: kneeSearch{phase: phaseCruise, clean: ms(10)},
			limit: 50,
			windows: []kneeWindow{
				{rtt: 10, phase: phaseCruise, limit: 50},
				{rtt: 10.04, phase: phaseCruise, limit: 50},
				{rtt: 10, phase: phasePeek, limit: 51},
			},
		},
		{
			name:    "cruise -> downSettle: a probe down stops at MinLimit",
			start:   kneeSearch{phase: phaseCruise, n: 2, sum: ms(20)},
			limit:   1,
			windows: []kneeWindow{{rtt: 10, phase: phaseDownSettle, limit: 1}},
		},
		{
			name:    "peek -> upJudge: after its one window the probe's limit returns to where it started",
			start:   kneeSearch{phase: phasePeek, valid: true, clean: ms(10), from: 50, step: 1, ref: ms(10)},
			limit:   51,
			windows: []kneeWindow{{rtt: 10, phase: phaseUpJudge, limit: 50}},
		},
		{
			name:    "peek -> upJudge: a congested window of a probe up is the probe's to judge",
			start:   kneeSearch{phase: phasePeek, valid: true, clean: ms(10), from: 50, step: 1, ref: ms(10)},
			limit:   51,
			windows: []kneeWindow{{rtt: 12, phase: phaseUpJudge, limit: 50}},
		},
		{
			name:  "upJudge -> peek: kept on the slower of two windows, the next peek goes twice as far",
			start: kneeSearch{phase: phaseUpJudge, valid: true, clean: ms(10), from: 50, step: 1, ref: ms(10)},
			limit: 50,
			windows: []kneeWindow{
				{rtt: 10.02, phase: phaseUpJudge, limit: 50},
				{rtt: 10.04, phase: phasePeek, limit: 53}, // 51 + 2
			},
		},
		{
			name:  "upJudge -> upJudge: after two kept peeks the next probe is held while it is judged",
			start: kneeSearch{phase: phaseUpJudge, valid: true, clean: ms(10), from: 51, step: 2, ref: ms(10), kept: 1},
			limit: 51,
			windows: []kneeWindow{
				{rtt: 10, phase: phaseUpJudge, limit: 51},
				{rtt: 10, phase: phaseUpJudge, limit: 57}, // 53 + 4
				{rtt: 10, phase: phaseUpJudge, limit: 57},
				{rtt: 10, phase: phaseUpJudge, limit: 65}, // 57 + 8
			},
		},
		{
			name:  "upJudge -> rest -> cruise: a rejected probe of one permit returns to where it started, known clean",
			start: kneeSearch{phase: phaseUpJudge, valid: true, clean: ms(10), from: 50, step: 1, ref: ms(10)},
			limit: 50,
			windows: []kneeWindow{
				{rtt: 10.1, phase: phaseUpJudge, limit: 50},
				{rtt: 10, phase: phaseRest, limit: 50},
				{rtt: 10, phase: phaseCruise, limit: 50},
			},
			after: wantValid(true),
		},
		{
			name:  "upJudge -> repeekSettle -> repeek -> peek: a rejected larger probe returns and peeks half as far",
			start: kneeSearch{phase: phaseUpJudge, valid: true, clean: ms(10), from: 53, step: 4, ref: ms(10), kept: 2},
			limit: 57,
			windows: []kneeWindow{
				{rtt: 10.2, phase: phaseUpJudge, limit: 57},
				{rtt: 10, phase: phaseRepeekSettle, limit: 53},
				{rtt: 10, phase: phaseRepeek, limit: 53},
				{rtt: 10, phase: phasePeek, limit: 55}, // 53 + 2
				{rtt: 10, phase: phaseUpJudge, limit: 53},
			},
		},
		{
			name:  "upJudge -> repeekSettle: a rejected probe of two permits narrows to one",
			start: kneeSearch{phase: phaseUpJudge, valid: true, clean: ms(10), from: 51, step: 2, ref: ms(10), kept: 1},
			limit: 51,
			windows: []kneeWindow{
				{rtt: 10, phase: phaseUpJudge, limit: 51},
				{rtt: 10.1, phase: phaseRepeekSettle, limit: 51},
			},
			after: func(t *testing.T, k kneeSearch) {
				if k.step != 1 || !k.bisect {
					t.Errorf("step %v, bisect %v; want 1, true", k.step, k.bisect)
				}
			},
		},
		{
			name:  "upJudge -> peek: narrowing, a kept probe halves the step",
			start: kneeSearch{phase: phaseUpJudge, valid: true, clean: ms(10), from: 53, step: 2, ref: ms(10), bisect: true},
			limit: 53,
			windows: []kneeWindow{
				{rtt: 10, phase: phaseUpJudge, limit: 53},
				{rtt: 10, phase: phasePeek, limit: 56}, // 55 + 1
			},
		},
		{
			name:  "upJudge -> rest: narrowing ends at the knee once the step would fall under one permit",
			start: kneeSearch{phase: phaseUpJudge, valid: true, clean: ms(10), from: 55, step: 1, ref: ms(10), bisect: true},
			limit: 55,
			windows: []kneeWindow{
				{rtt: 10, phase: phaseUpJudge, limit: 55},
				{rtt: 10, phase: phaseRest, limit: 56},
			},
			after: wantValid(true),
		},
		{
			name:  "upJudge -> downSettle: even the probe's fastest window queued, so the limit it started from is above the knee",
			start: kneeSearch{phase: phaseUpJudge, valid: true, clean: ms(10), from: 50, step: 1, ref: ms(10)},
			limit: 50,
			windows: []kneeWindow{
				{rtt: 10.3, phase: phaseUpJudge, limit: 50},
				{rtt: 10.2, phase: phaseDownSettle, limit: 49},
			},
			after: func(t *testing.T, k kneeSearch) {
				if k.valid || k.ref != ms(10.2) || k.from != 50 {
					t.Errorf("valid %v, ref %v, from %v; want false, the fastest window (10.2 ms), 50", k.valid, k.ref, k.from)
				}
			},
		},
		{
			name:    "downSettle -> downJudge: the window after a probe down passes",
			start:   kneeSearch{phase: phaseDownSettle, from: 50, step: 1, ref: ms(10.2)},
			limit:   49,
			windows: []kneeWindow{{rtt: 10.2, phase: phaseDownJudge, limit: 49}},
		},
		{
			name:    "downJudge -> downSettle: a probe down that lowered latency is kept and the next goes twice as far",
			start:   kneeSearch{phase: phaseDownJudge, from: 50, step: 1, ref: ms(10.2)},
			limit:   49,
			windows: []kneeWindow{{rtt: 10, phase: phaseDownSettle, limit: 47}},
		},
		{
			name:    "downJudge -> rest: a probe down that did not lower latency returns; its RTT is the clean one",
			start:   kneeSearch{phase: phaseDownJudge, from: 50, step: 1, ref: ms(10.2)},
			limit:   49,
			windows: []kneeWindow{{rtt: 10.19, phase: phaseRest, limit: 50}},
			after: func(t *testing.T, k kneeSearch) {
				if !k.valid || k.clean != ms(10.19) {
					t.Errorf("valid %v, clean %v; want true, 10.19 ms", k.valid, k.clean)
				}
			},
		},
		{
			name:    "rest -> cruise: the window after the limit returned passes",
			start:   kneeSearch{phase: phaseRest, valid: true, clean: ms(10)},
			limit:   50,
			windows: []kneeWindow{{rtt: 10, phase: phaseCruise, limit: 50}},
			after:   wantValid(true),
		},
	}
	from := map[phase]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := NewGradient2(Gradient2Options{DisableSlowStart: true})
			if err != nil {
				t.Fatal(err)
			}
			g.base.rtt = ms(10)
			g.knee = c.start
			if g.knee.noise == 0 {
				g.knee.noise = 0.001
			}
			limit := c.limit
			for i, w := range c.windows {
				from[g.knee.phase] = true
				inFlight := w.inFlight
				if inFlight == 0 {
					inFlight = int(limit)
				}
				was := g.knee.phase
				got := g.Update(Sample{Limit: limit, MinLimit: 1, MaxLimit: 1000,
					RTT: time.Duration(ms(w.rtt)), InFlight: inFlight, Samples: 50})
				if g.knee.phase != w.phase || math.Abs(got-w.limit) > 1e-9 {
					t.Fatalf("window %d (%v ms, in %v): limit %v → %v, phase %v; want limit %v, phase %v",
						i+1, w.rtt, was, limit, got, g.knee.phase, w.limit, w.phase)
				}
				limit = got
			}
			if c.after != nil {
				c.after(t, g.knee)
			}
		})
	}
	for p := phaseCruise; p <= phaseDownJudge; p++ {
		if !from[p] {
			t.Errorf("no row leaves phase %v", p)
		}
	}
}

func wantValid(want bool) func(*testing.T, kneeSearch) {
	return func(t *testing.T, k kneeSearch) {
		t.Helper()
		if k.valid != want {
			t.Errorf("valid = %v, want %v", k.valid, want)
		}
	}
}

// Invariant: the noise between cruise windows follows a slow window by at
// most twice the noise so far, a fifth of the way: one collection or busy
// moment cannot blind the probes for long.
func TestKneeNoiseOneSlowWindow(t *testing.T) {
	k := kneeSearch{phase: phaseCruise, valid: true, clean: ms(10), noise: 0.001}
	s := Sample{Limit: 50, MinLimit: 1}
	k.cruise(s, ms(10))
	k.cruise(s, ms(10.4)) // a 3.8 % change, counted as 0.2 %
	if want := 0.001 + (0.002-0.001)/kneeNoiseWindows; math.Abs(k.noise-want) > 1e-12 {
		t.Errorf("noise = %v, want %v", k.noise, want)
	}
}
