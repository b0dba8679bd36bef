package queue

import (
	"sort"
	"time"
)

// waiterState is the life of one queued Acquire. A waiter is created queued
// and leaves that state exactly once, always under the engine's mutex, to
// one of the final states. Whoever makes the transition owns its
// consequence: the granter moves a permit to the waiter, the evicter sends
// it away, and the waiter itself records a cancel or timeout. That single
// transition is what keeps a permit from being lost or counted twice when a
// grant races a cancellation.
type waiterState uint8

const (
	waiterQueued    waiterState = iota // in the queue, waiting
	waiterGranted                      // a permit was moved to it
	waiterEvicted                      // removed by the overflow policy
	waiterCancelled                    // its context ended first
	waiterTimedOut                     // its queue timeout fired first
	waiterClosed                       // the engine was closed
)

// waiter is one Acquire call waiting in a waitQueue. Fields other than
// ready are guarded by the engine's mutex.
type waiter struct {
	priority int
	state    waiterState
	// queuedAt is when the waiter joined the queue; the CoDel discipline
	// reads it to reject waiters that have waited past its target.
	queuedAt time.Time
	// ready is closed by the goroutine that grants or evicts the waiter, so
	// the waiting goroutine wakes exactly once for either outcome.
	ready chan struct{}

	// prev/next link the waiter inside its priority's FIFO list;
	// older/newer link it into the queue-wide arrival list that drop-oldest
	// reads. Both are intrusive so that queueing allocates nothing beyond the
	// waiter itself.
	prev, next   *waiter
	older, newer *waiter
}

// priorityList is the FIFO of waiters that share one priority.
type priorityList struct {
	priority   int
	head, tail *waiter
}

// waitQueue holds the waiters of an Engine, ordered by priority
// (lower first) and then by arrival. It supports, all without allocation
// once warmed up:
//
//   - push: O(log P) to find the priority's list, O(1) to append;
//   - best (peek/pop the next waiter to grant): O(1);
//   - remove an arbitrary waiter (cancel, timeout, eviction): O(log P);
//   - oldest waiter overall (drop-oldest): O(1);
//   - newest waiter of the lowest priority (drop-lowest-priority): O(1).
//
// P is the number of distinct priorities currently queued, at most the
// queue length. A priority appearing or disappearing also shifts the small
// sorted index of lists (a memmove of at most P entries); with the handful
// of priority classes real services use, that is cheaper than a heap. Memory
// is bounded by the number of queued waiters, which the engine caps at
// Options.QueueLimit.
//
// The zero value is an empty queue. Not safe for concurrent use: the
// engine's mutex guards it.
type waitQueue struct {
	lists  []priorityList // sorted by priority, none empty
	oldest *waiter        // arrival order: oldest ... newest
	newest *waiter
	n      int
}

// len returns the number of queued waiters.
func (q *waitQueue) len() int { return q.n }

// find returns the index of priority p's list in q.lists, or the index where
// it would be inserted, and whether it exists.
func (q *waitQueue) find(p int) (int, bool) {
	// The common cases, one priority or the newcomer at an end, skip the
	// binary search.
	n := len(q.lists)
	if n == 0 {
		return 0, false
	}
	if q.lists[n-1].priority < p {
		return n, false
	}
	i := sort.Search(n, func(i int) bool { return q.lists[i].priority >= p })
	return i, i < n && q.lists[i].priority == p
}

// push appends w behind every queued waiter of the same or better priority.
func (q *waitQueue) push(w *waiter) {
	i, ok := q.find(w.priority)
	if !ok {
		q.lists = append(q.lists, priorityList{})
		copy(q.lists[i+1:], q.lists[i:])
		q.lists[i] = priorityList{priority: w.priority}
	}
	l := &q.lists[i]
	w.prev, w.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w

	w.older, w.newer = q.newest, nil
	if q.newest != nil {
		q.newest.newer = w
	} else {
		q.oldest = w
	}
	q.newest = w
	q.n++
}

// best returns the waiter to grant next (lowest priority number, earliest
// arrival), or nil if the queue is empty.
func (q *waitQueue) best() *waiter {
	if len(q.lists) == 0 {
		return nil
	}
	return q.lists[0].head
}

// popBest removes and returns best(), or nil.
func (q *waitQueue) popBest() *waiter {
	w := q.best()
	if w != nil {
		q.remove(w)
	}
	return w
}

// newestOfBest returns the most recently queued waiter of the best
// priority (adaptive LIFO), or nil.
func (q *waitQueue) newestOfBest() *waiter {
	if len(q.lists) == 0 {
		return nil
	}
	return q.lists[0].tail
}

// oldestWaiter returns the waiter that has waited longest, whatever its
// priority, or nil.
func (q *waitQueue) oldestWaiter() *waiter { return q.oldest }

// newestOfLowest returns the most recently queued waiter of the lowest
// priority (the largest priority number), or nil.
func (q *waitQueue) newestOfLowest() *waiter {
	if len(q.lists) == 0 {
		return nil
	}
	return q.lists[len(q.lists)-1].tail
}

// remove unlinks w, which must be in q.
func (q *waitQueue) remove(w *waiter) {
	i, ok := q.find(w.priority)
	if !ok {
		panic("resilience: internal error: waiter not in its queue")
	}
	l := &q.lists[i]
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	if l.head == nil {
		copy(q.lists[i:], q.lists[i+1:])
		q.lists[len(q.lists)-1] = priorityList{} // drop pointers for the GC
		q.lists = q.lists[:len(q.lists)-1]
	}

	if w.older != nil {
		w.older.newer = w.newer
	} else {
		q.oldest = w.newer
	}
	if w.newer != nil {
		w.newer.older = w.older
	} else {
		q.newest = w.older
	}
	w.prev, w.next, w.older, w.newer = nil, nil, nil, nil
	q.n--
}
