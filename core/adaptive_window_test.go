package resilience

import (
	"testing"
	"time"
)

// A timed release closes a window once it has lasted maxWindow, or once
// it holds min(10, limit) outcomes, enough timed samples, and has lasted
// its length; a window with samples but none timed has no mean and stays
// open.
func TestSampleWindowCloses(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, c := range []struct {
		name  string
		w     sampleWindow
		now   int64
		limit int
		want  bool
	}{
		{"enough, long enough", sampleWindow{length: 5 * ms, samples: 10, timed: 10}, 5 * ms, 100, true},
		{"enough, too short", sampleWindow{length: 5 * ms, samples: 10, timed: 10}, 5*ms - 1, 100, false},
		{"too few", sampleWindow{length: 5 * ms, samples: 9, timed: 9}, 6 * ms, 100, false},
		{"few, but as many as the limit", sampleWindow{length: 5 * ms, samples: 3, timed: 3}, 6 * ms, 3, true},
		{"drops count", sampleWindow{length: 5 * ms, samples: 4, timed: 4, drops: 6}, 6 * ms, 100, true},
		{"too few timed", sampleWindow{length: 5 * ms, samples: 20, timed: 9}, 6 * ms, 100, false},
		{"samples, none timed, past maxWindow", sampleWindow{samples: 20}, maxWindow, 100, false},
		{"only drops, past maxWindow", sampleWindow{drops: 1}, maxWindow, 100, true},
		{"empty, past maxWindow", sampleWindow{start: ms}, ms + maxWindow, 100, true},
	} {
		if got := c.w.closes(c.now, c.limit); got != c.want {
			t.Errorf("%s: closes = %v, want %v", c.name, got, c.want)
		}
	}
}

// The window's RTT is the mean weighted by each timed execution's weight,
// its MinRTT the shortest timed one; drops and the in-flight maximum count
// every execution.
func TestSampleWindowRecord(t *testing.T) {
	const ms = int64(time.Millisecond)
	var w sampleWindow
	w.record(LimitSampled, 1, 0, 1, 10*ms, 3)           // timed in full, 10 ms
	w.record(LimitSampled, 1, 0, sparseEvery, 40*ms, 5) // sparsely timed, 40 ms
	w.record(LimitSampled, 1, 0, 0, 0, 2)               // untimed
	w.record(LimitDropped, sparseEvery, 0, 0, 0, 1)     // an abandonment standing for 16
	s := w.sample(7.5, 1, 100, time.Millisecond)
	want := time.Duration((10*ms + sparseEvery*40*ms) / (1 + sparseEvery))
	if s.RTT != want || s.MinRTT != 10*time.Millisecond || s.Samples != 3 || s.Drops != sparseEvery ||
		s.InFlight != 5 || s.Limit != 7.5 || s.MinLimit != 1 || s.MaxLimit != 100 || s.CPUWait != time.Millisecond {
		t.Fatalf("sample = %+v, want RTT %v, MinRTT 10ms, 3 samples, %d drops, in flight 5", s, want, sparseEvery)
	}
}

// The next window lasts the closing one's mean RTT, within [minWindow,
// maxWindow], or as long as it did when it had no samples.
func TestSampleWindowNext(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, c := range []struct {
		w    sampleWindow
		rtt  time.Duration
		want int64
	}{
		{sampleWindow{samples: 1, length: 3 * ms}, 20 * time.Millisecond, 20 * ms},
		{sampleWindow{samples: 1}, time.Microsecond, minWindow},
		{sampleWindow{samples: 1}, 5 * time.Second, maxWindow},
		{sampleWindow{length: 30 * ms, drops: 4}, 0, 30 * ms},
		{sampleWindow{}, 0, minWindow},
	} {
		n := c.w.next(99, c.rtt)
		if n.start != 99 || n.length != c.want || n.samples != 0 || n.drops != 0 || n.started != 0 {
			t.Errorf("next of %+v with RTT %v = %+v, want a fresh window at 99 of length %d", c.w, c.rtt, n, c.want)
		}
	}
}

// The abandonment baseline falls at once to a lower window mean and rises
// by 1/64 of itself per window (at least 1 ns, never past the mean).
func TestNextBaseRTT(t *testing.T) {
	for _, c := range []struct{ base, rtt, want int64 }{
		{0, 500, 500},
		{640, 100, 100},
		{640, 10000, 650},
		{640, 645, 645},
		{10, 1000, 11},
		{640, 640, 640},
	} {
		if got := nextBaseRTT(c.base, c.rtt); got != c.want {
			t.Errorf("nextBaseRTT(%d, %d) = %d, want %d", c.base, c.rtt, got, c.want)
		}
	}
}
