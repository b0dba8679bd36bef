// Package window holds the sliding window of counts that the retry budget
// (package budget) and the adaptive throttle (package throttle) share.
package window

import (
	"sync"
	"time"
)

// Slots is the number of slots a window is cut into.
const Slots = 10

// MinWindow is the shortest window: one millisecond a slot.
const MinWindow = Slots * time.Millisecond

// Window counts three kinds of events (A, B and C) over a sliding window
// cut into Slots slots, keeping one slot more than the window so that B
// can be counted over a span that covers the whole window and A over one
// inside it (see budget.Budget). Mu guards it: the critical section is a
// few additions, cheaper than making the slot reset and the counts agree
// without one.
type Window struct {
	Mu    sync.Mutex
	slot  time.Duration
	start time.Time // slot numbers count from here (monotonic)
	cur   int64     // slot number of the newest slot
	slots [Slots + 1]Counts
}

// Counts are one slot's counts.
type Counts struct{ A, B, C int64 }

// Init sets the window's length and starts it now.
func (w *Window) Init(window time.Duration) {
	w.slot = window / Slots
	w.start = time.Now()
}

// Advance moves the window to now and returns the current slot. w.Mu must
// be held.
func (w *Window) Advance() *Counts {
	n := int64(time.Since(w.start) / w.slot)
	if n > w.cur {
		// Clear the slots skipped since the last call, at most all of
		// them.
		for i := w.cur + 1; i <= n && i <= w.cur+int64(len(w.slots)); i++ {
			w.slots[i%int64(len(w.slots))] = Counts{}
		}
		w.cur = n
	}
	return &w.slots[w.cur%int64(len(w.slots))]
}

// Sums returns A over the current and the Slots-1 slots before it (a span
// a little shorter than the window, inside it) and B over every slot (a
// span at least the window). w.Mu must be held.
func (w *Window) Sums() (a, b int64) {
	// The oldest slot, Slots before the current one, shares the ring
	// index after it.
	oldest := (w.cur + 1) % int64(len(w.slots))
	for i := range w.slots {
		s := &w.slots[i]
		b += s.B
		if int64(i) != oldest {
			a += s.A
		}
	}
	return a, b
}

// Sums3 returns A, B and C over the current and the Slots-1 slots before
// it. w.Mu must be held.
func (w *Window) Sums3() (a, b, c int64) {
	oldest := (w.cur + 1) % int64(len(w.slots))
	for i := range w.slots {
		if int64(i) != oldest {
			s := &w.slots[i]
			a, b, c = a+s.A, b+s.B, c+s.C
		}
	}
	return a, b, c
}
