package deadline

import (
	"math"
	"sync"
	"time"
)

// Firer is what a Node belongs to: Fire runs on the List's timer goroutine
// when the node's deadline passes, after the node has left the list.
type Firer interface{ Fire() }

// Node is an entry of a List. Its owner embeds it and sets Owner; the List
// sets the rest. The zero value is an unlisted node.
type Node struct {
	Owner      Firer
	at         int64 // the deadline, in nanoseconds from the List's epoch
	prev, next *Node // listed: prev set, or the list's head
}

// List is one timer serving many deadlines. When they share one timeout,
// deadlines come nearly in arrival order, so a list kept in deadline
// order is appended at its tail: adding and removing an entry is a short
// critical section instead of a runtime timer (its allocation, its heap
// insertion and removal). The timer is armed for the earliest deadline it
// knows of; when it fires it fires every due node and re-arms for the next.
// An entry that leaves in time only unlinks itself, so under steady
// traffic the timer is touched about once per timeout period.
//
// The timer is the List's, not an entry's: after the last entry leaves it
// may stay armed until the deadline it was set for, then fires once, finds
// nothing due, and idles.
//
// An entry whose deadline is far earlier than the tail's would need a long
// walk to its place; past maxWalk steps Add refuses it, and the caller
// gives it a timer of its own.
//
// A timer belongs to one clock: the real one, or the fake clock of a
// testing/synctest bubble (where time.Now carries no monotonic reading).
// A timer armed in a bubble dies with it, and one moved between clocks
// crashes or never fires, so Add refuses entries read on a bubble's clock
// (their owners use a timer of their own) unless AllowFakeClock was
// called, which a test does on a List it uses in one bubble only.
//
// Fire runs on a goroutine of its own for each due node, so an owner that
// writes to a slow client cannot hold up the other deadlines.
//
// The zero value is an empty List, ready to use. It is safe for concurrent
// use and must not be copied after first use.
type List struct {
	mu         sync.Mutex
	head, tail *Node
	timer      *time.Timer
	// epoch is the clock's reading when the timer was made: deadlines
	// count from it in nanoseconds, monotonic on the real clock, so that a
	// node keeps an int64 rather than a time.Time.
	epoch     time.Time
	at        int64 // when the timer fires, from epoch; meaningful while armed
	armed     bool  // the timer is set for at; false: idle
	fake      bool  // the timer runs on a synctest bubble's clock
	allowFake bool  // AllowFakeClock was called
}

// AllowFakeClock lets the list take entries read inside a synctest bubble.
// Only for tests: the list must then be used inside that one bubble.
func (l *List) AllowFakeClock() {
	l.mu.Lock()
	l.allowFake = true
	l.mu.Unlock()
}

// maxWalk bounds how far from the tail Add looks for a node's place.
const maxWalk = 8

// FakeClock reports whether now, read with time.Now, was read inside a
// synctest bubble: a bubble's clock carries no monotonic reading.
func FakeClock(now time.Time) bool { return now == now.Round(0) }

// Add lists n for the deadline now+budget and arms the timer if n is now
// the earliest. It reports false when n must have a timer of its own.
func (l *List) Add(n *Node, now time.Time, budget time.Duration) bool {
	fake := FakeClock(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	if (fake && !l.allowFake) || (l.timer != nil && l.fake != fake) {
		return false
	}
	if l.timer == nil {
		l.epoch = now // the first entry: the timer is made on now's clock below
	}
	el := now.Sub(l.epoch)
	dl := int64(el + budget)
	if budget > 0 && dl < int64(el) {
		dl = math.MaxInt64 // a deadline too far to count: never due
	}
	after := l.tail // n goes after this one (nil: at the head)
	for steps := 0; after != nil && after.at > dl; steps++ {
		if steps == maxWalk {
			return false
		}
		after = after.prev
	}
	n.at = dl
	n.prev = after
	if after == nil {
		n.next = l.head
		l.head = n
	} else {
		n.next = after.next
		after.next = n
	}
	if n.next == nil {
		l.tail = n
	} else {
		n.next.prev = n
	}
	if !l.armed || dl < l.at {
		l.at, l.armed = dl, true
		if l.timer == nil {
			l.timer = time.AfterFunc(budget, l.fire)
			l.fake = fake
		} else {
			l.timer.Reset(budget)
		}
	}
	return true
}

// Remove takes n off the list, if it is on it. The timer is left alone: if
// it fires for n's deadline, it finds nothing due and re-arms or idles.
func (l *List) Remove(n *Node) {
	l.mu.Lock()
	if n.prev != nil || l.head == n {
		l.unlinkLocked(n)
	}
	l.mu.Unlock()
}

// Len returns the number of listed nodes, for tests and diagnostics.
func (l *List) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for x := l.head; x != nil; x = x.next {
		n++
	}
	return n
}

// Idle reports whether nothing is listed and the timer is not armed.
func (l *List) Idle() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head == nil && !l.armed
}

func (l *List) unlinkLocked(n *Node) {
	if n.prev == nil {
		l.head = n.next
	} else {
		n.prev.next = n.next
	}
	if n.next == nil {
		l.tail = n.prev
	} else {
		n.next.prev = n.prev
	}
	n.prev, n.next = nil, nil
}

// fire runs on the timer's goroutine: it fires each node that is due, on
// a goroutine of its own, and re-arms for the next deadline.
func (l *List) fire() {
	l.mu.Lock()
	for {
		h := l.head
		if h == nil {
			l.armed = false
			l.mu.Unlock()
			return
		}
		if wait := time.Duration(h.at) - time.Since(l.epoch); wait > 0 {
			l.at = h.at
			l.timer.Reset(wait)
			l.mu.Unlock()
			return
		}
		l.unlinkLocked(h)
		go h.Owner.Fire()
	}
}
