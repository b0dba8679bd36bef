package inbound

import (
	"sync"
	"time"
)

// deadlines is the one timer a Middleware uses for the deadlines of all
// its timed requests. Every request gets the same timeout, so deadlines
// come nearly in arrival order and a list kept in deadline order is
// appended at its tail: adding and removing a request is a short critical
// section instead of a runtime timer (its allocation, its heap insertion
// and removal). The timer is armed for the earliest deadline it knows of;
// when it fires it answers every request that is due and re-arms for the
// next one. A request that finishes in time only leaves the list, so under
// steady traffic the timer is touched about once per timeout period.
//
// The timer is the Middleware's, not a request's: after the last request
// leaves, it may stay armed until the deadline it was set for, then fires
// once, finds nothing due, and stays idle. Nothing else outlives a request.
//
// A request whose deadline is far earlier than the tail's (an upstream
// budget shorter than the timeout) would need a long walk to its place;
// past maxWalk steps it keeps a timer of its own instead.
//
// A timer belongs to one clock: the real one, or the fake clock of a
// testing/synctest bubble (where time.Now carries no monotonic reading).
// A Middleware used both inside and outside bubbles (a test suite sharing
// one) must not move its timer between clocks, which would crash or never
// fire: a request on the other clock keeps a timer of its own, and in a
// bubble the timer is re-armed whenever the list was empty, since the
// bubble it was armed in may be gone.
type deadlines struct {
	mu         sync.Mutex
	head, tail *timedRequest
	timer      *time.Timer
	fake       bool      // the timer runs on a synctest bubble's clock
	at         time.Time // when the timer fires; zero: idle
}

// fakeClock reports whether now was read inside a synctest bubble.
func fakeClock(now time.Time) bool { return now == now.Round(0) }

// maxWalk bounds how far from the tail add looks for a request's place.
const maxWalk = 8

// add lists t by its deadline (t.dctx.deadline, t.budget from now, the
// time t started) and arms the timer if t is now the earliest. It reports
// false when t must keep a timer of its own.
func (d *deadlines) add(t *timedRequest, now time.Time) bool {
	dl := t.dctx.deadline
	fake := fakeClock(now)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && d.fake != fake {
		return false
	}
	if fake && d.head == nil {
		d.at = time.Time{}
	}
	after := d.tail // t goes after this one (nil: at the head)
	for steps := 0; after != nil && after.dctx.deadline.After(dl); steps++ {
		if steps == maxWalk {
			return false
		}
		after = after.prev
	}
	t.prev = after
	if after == nil {
		t.next = d.head
		d.head = t
	} else {
		t.next = after.next
		after.next = t
	}
	if t.next == nil {
		d.tail = t
	} else {
		t.next.prev = t
	}
	t.listed = true
	if d.at.IsZero() || dl.Before(d.at) {
		d.at = dl
		if d.timer == nil {
			d.timer = time.AfterFunc(t.budget, d.fire)
			d.fake = fake
		} else {
			d.timer.Reset(t.budget)
		}
	}
	return true
}

// remove takes t off the list, if it is on it. The timer is left alone: if
// it fires for t's deadline, it finds nothing due and re-arms or idles.
func (d *deadlines) remove(t *timedRequest) {
	d.mu.Lock()
	if t.listed {
		d.unlinkLocked(t)
	}
	d.mu.Unlock()
}

func (d *deadlines) unlinkLocked(t *timedRequest) {
	if t.prev == nil {
		d.head = t.next
	} else {
		t.prev.next = t.next
	}
	if t.next == nil {
		d.tail = t.prev
	} else {
		t.next.prev = t.prev
	}
	t.prev, t.next, t.listed = nil, nil, false
}

// fire runs on the timer's goroutine: it answers each request that is due,
// outside the list's lock, and re-arms for the next deadline.
func (d *deadlines) fire() {
	d.mu.Lock()
	for {
		h := d.head
		if h == nil {
			d.at = time.Time{}
			d.mu.Unlock()
			return
		}
		if wait := time.Until(h.dctx.deadline); wait > 0 {
			d.at = h.dctx.deadline
			d.timer.Reset(wait)
			d.mu.Unlock()
			return
		}
		d.unlinkLocked(h)
		d.mu.Unlock()
		h.fire()
		d.mu.Lock()
	}
}
