package queue

import (
	"sort"
	"time"

	"github.com/ylcnfrht/resilience/core/internal/fair"
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

	// In a fair queue: the waiter's place in its flow (node, instead of
	// prev/next), the flow's key and weight, whether its permit is to be
	// counted to the flow (hold), and the flow that holds it once granted.
	node   fair.Node[*waiter]
	flow   string
	weight int
	hold   bool
	held   *Flow
	// cost is the permits the waiter asks for (0 or 1: one); once
	// granted, the permits it holds (see cost.go).
	cost int
}

// Flow is a flow of a fair engine that holds a permit, for
// ReleaseFlowLocked.
type Flow = fair.Flow[*waiter]

// priorityList is the FIFO of waiters that share one priority; in a fair
// queue, level orders them by flow instead (head and tail are unused).
type priorityList struct {
	priority   int
	head, tail *waiter
	level      *fair.Level[*waiter]
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
//
// A fair queue (flows not nil) orders each priority's waiters between
// flows instead of by arrival (see package fair): push and remove are then
// O(log F) in the flows waiting at the priority, best O(1).
type waitQueue struct {
	lists  []priorityList // sorted by priority, none empty
	oldest *waiter        // arrival order: oldest ... newest
	newest *waiter
	n      int
	flows  *fair.Table[*waiter] // nil: not fair
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
		if q.flows != nil {
			q.lists[i].level = q.flows.NewLevel()
		}
	}
	l := &q.lists[i]
	if l.level != nil {
		w.node.Value = w
		l.level.Push(&w.node, w.flow, w.weight)
	} else {
		w.prev, w.next = l.tail, nil
		if l.tail != nil {
			l.tail.next = w
		} else {
			l.head = w
		}
		l.tail = w
	}

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
	if l := q.lists[0].level; l != nil {
		return l.Best().Value
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
	if l := q.lists[0].level; l != nil {
		return l.BestNewest().Value
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
	if l := q.lists[len(q.lists)-1].level; l != nil {
		_, _, _, newest := l.Largest()
		return newest.Value
	}
	return q.lists[len(q.lists)-1].tail
}

// remove unlinks w, which must be in q.
func (q *waitQueue) remove(w *waiter) { q.unlink(w, false) }

// grant unlinks w, which must be in q, to give it a permit: in a fair
// queue a waiter that holds its permit (w.hold) has it counted to its
// flow, w.held.
func (q *waitQueue) grant(w *waiter) { q.unlink(w, w.hold) }

func (q *waitQueue) unlink(w *waiter, hold bool) {
	i, ok := q.find(w.priority)
	if !ok {
		panic("resilience: internal error: waiter not in its queue")
	}
	l := &q.lists[i]
	empty := false
	if l.level != nil {
		if hold {
			w.held = fair.GrantN(&w.node, max(w.cost, 1))
		} else {
			fair.Remove(&w.node)
		}
		if empty = l.level.Len() == 0; empty {
			q.flows.FreeLevel(l.level)
		}
	} else {
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
		empty = l.head == nil
	}
	if empty {
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

// fairVictim is the waiter a fair queue sheds for a newcomer r when it
// is full, under overflow, or nil to reject the newcomer: the flow with
// the most queued (per weight) gives up a waiter to a flow with fewer.
//
// A flow's use is its waiters at the priority and its permits, per
// weight (see fair.Level.Largest).
//
//   - RejectNew: at r's priority, the newest waiter of the flow using the
//     most, if r's flow would still use less with the newcomer.
//   - DropLowestPriority: the newest waiter of the flow using the most at
//     the lowest priority if r outranks it; among equals, as RejectNew;
//     otherwise none.
//   - DropOldest: the oldest waiter of the flow using the most at any
//     priority, r's own flow counted with the newcomer; none if that is
//     r's flow and it has no waiter at r's priority.
func (q *waitQueue) fairVictim(r Rank, overflow Overflow) *waiter {
	switch overflow {
	case DropOldest:
		return q.oldestOfLargest(r)
	case DropLowestPriority:
		low := &q.lists[len(q.lists)-1]
		if r.Priority < low.priority {
			_, _, _, newest := low.level.Largest()
			return newest.Value
		}
		if r.Priority > low.priority {
			return nil
		}
	}
	i, ok := q.find(r.Priority)
	if !ok {
		return nil
	}
	l := q.lists[i].level
	f, use, _, newest := l.Largest()
	if f.Key() == r.Flow || int64(use)*q.flows.Weight(r.Flow, r.Weight) <= int64(l.Use(r.Flow))*f.Weight() {
		return nil
	}
	return newest.Value
}

// oldestOfLargest is fairVictim under DropOldest: the oldest waiter of
// the flow using the most at any priority, r's own flow counted with the
// newcomer (its waiters at r's priority, its permits, and one), or nil to
// reject the newcomer.
//
// When r's flow uses the most and has a waiter at r's priority, that
// waiter goes (ties included): the flow gives up its oldest. When it uses
// strictly the most through its permits alone, with no waiter at r's
// priority, the newcomer is that flow's oldest request waiting and is
// rejected: evicting a lighter flow's waiter for it would let a flow's
// permits displace the waiters of a flow holding fewer. On a tie the
// newcomer is queued, as drop-oldest favours newcomers.
func (q *waitQueue) oldestOfLargest(r Rank) *waiter {
	var (
		big     *Flow
		bigN    int
		victim  *waiter
		myLevel *fair.Level[*waiter]
	)
	for i := range q.lists {
		l := q.lists[i].level
		if q.lists[i].priority == r.Priority {
			myLevel = l
		}
		if f, n, oldest, _ := l.Largest(); big == nil || int64(n)*big.Weight() > int64(bigN)*f.Weight() {
			big, bigN, victim = f, n, oldest.Value
		}
	}
	var (
		mine *fair.Node[*waiter]
		n    = 1 // r's flow's use, the newcomer counted
	)
	if myLevel != nil {
		mine, n = myLevel.Head(r.Flow), myLevel.Use(r.Flow)
	} else if f := q.flows.Lookup(r.Flow); f != nil {
		n += f.Held()
	}
	// Per weight, cross-multiplied.
	own, most := int64(n)*big.Weight(), int64(bigN)*q.flows.Weight(r.Flow, r.Weight)
	switch {
	case mine != nil && own >= most:
		return mine.Value
	case mine == nil && own > most:
		return nil
	}
	return victim
}

// fairSpared reports whether CoDel spares w as it spares the best
// priority: in a fair queue, a waiter of the best priority queued whose
// flow is within its share of the limit permits, counting its permits and
// its waiters kept ahead of w in this purge (fair.Table.WithinShare), or
// whose flow asks for well less than the heaviest flow and has had no
// waiter shed within the interval (fair.Table.Spared). A standing queue is
// the doing of the flows whose demand exceeds what they get; CoDel drains
// theirs, and the flows under their share keep their queue timeout. The
// first test holds at every moment, for clients of any kind (a closed
// loop that re-sends at once after a rejection is never idle long enough
// to build a demand history); the second tells a flow that is under its
// share over time when permits free in bursts, and its waiters pile up
// between them. Call q.flows.Pass before the purge's first waiter.
func (q *waitQueue) fairSpared(w *waiter, now time.Time, interval time.Duration, limit int) bool {
	if q.flows == nil || w.priority != q.lists[0].priority {
		return false
	}
	return q.flows.WithinShare(&w.node, limit, now, interval) || q.flows.Spared(w.flow, now, interval)
}

// fairKept records, in a fair queue, that the purge keeps w.
func (q *waitQueue) fairKept(w *waiter) {
	if q.flows != nil {
		q.flows.Kept(&w.node)
	}
}

// fairSparesNewcomer is fairSpared for a newcomer r.
func (q *waitQueue) fairSparesNewcomer(r Rank, now time.Time, interval time.Duration, limit int) bool {
	if q.flows == nil || (len(q.lists) > 0 && r.Priority > q.lists[0].priority) {
		return false
	}
	queued := 0
	if len(q.lists) > 0 && q.lists[0].priority == r.Priority {
		queued = q.lists[0].level.Queued(r.Flow)
	}
	return q.flows.NewcomerWithinShare(r.Flow, r.Weight, queued, limit, now, interval) || q.flows.Spared(r.Flow, now, interval)
}

// fairShed records, in a fair queue, that w is being shed at now from
// limit permits.
func (q *waitQueue) fairShed(w *waiter, now time.Time, limit int) {
	if q.flows != nil {
		if f := w.node.Flow(); f != nil {
			q.flows.Shed(f, now, limit)
		}
	}
}
