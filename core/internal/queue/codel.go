package queue

import "time"

// The CoDel defaults: a queue non-empty for an interval is standing, and
// newcomers to a standing queue wait at most the target.
const (
	defaultCoDelInterval = 100 * time.Millisecond
	defaultCoDelTarget   = 5 * time.Millisecond
)

// codel is the state of the CoDel discipline inside an Engine, guarded
// by the engine's mutex.
//
// The queue is judged standing once it has been non-empty for an interval,
// and it then stays standing while the engine keeps shedding: it counts as
// drained only after a whole interval in which nothing was shed (no waiter
// timed out, was purged or evicted, and no newcomer found the queue full).
// Judging by the queue's emptiness alone is not enough under sustained
// overload: with newcomers held to the short target the queue empties
// again and again (waiters time out, a grant takes the last one), and each
// time a fresh interval would begin in which newcomers get the long queue
// timeout, wait up to an interval and are then rejected late, the standing
// queue's delay coming back as shed latency.
type codel struct {
	interval time.Duration
	target   time.Duration
	lifo     bool

	// nonEmptySince is when the queue last went from empty to non-empty
	// while not standing.
	nonEmptySince time.Time
	// overloaded is set once the queue has stood for an interval; it is
	// cleared an interval after lastShed.
	overloaded bool
	lastShed   time.Time
	// standingEnded is when the queue last stopped counting as standing.
	// For recallIntervals after it, a queue that stays non-empty for a
	// target (not a whole interval) is standing again: overload that
	// pauses for an interval (permits freed in bursts leave stretches in
	// which nothing is shed) resumes with short waits, not with an
	// interval of full queue timeouts. RFC 8289 keeps its drop state
	// for 16 intervals after leaving the dropping state for the same
	// reason.
	standingEnded time.Time
	// shedEmptyAt is set when shedding, not service, emptied the queue. A
	// queue emptied by timing out, purging or evicting its waiters (a queue
	// of one whose waiter each newcomer evicts) has not drained, so the next
	// push, if it comes within an interval, does not start a fresh one.
	shedEmptyAt time.Time
	// worstShed is the largest priority number shed while standing,
	// shedAt when; an interval later it is forgotten. The best class is
	// spared while a worse one is queued or was shed that recently: with
	// permits freed in bursts, the worse waiters time out during a gap
	// between grants, and the best class would otherwise be judged alone
	// for the rest of the gap.
	worstShed   int
	worstShedAt time.Time
}

func newCoDel(o *CoDel) *codel {
	if o == nil {
		return nil
	}
	c := &codel{interval: o.Interval, target: o.Target, lifo: o.AdaptiveLIFO}
	if c.interval == 0 {
		c.interval = defaultCoDelInterval
	}
	if c.target == 0 {
		c.target = defaultCoDelTarget
	}
	return c
}

// standing reports whether the queue is standing at now, updating the
// judgement: it starts once q has been non-empty for an interval and ends
// an interval after the last shed.
func (c *codel) standing(q *waitQueue, now time.Time) bool {
	if c.overloaded {
		if now.Sub(c.lastShed) < c.interval {
			return true
		}
		c.overloaded = false
		c.standingEnded = c.lastShed.Add(c.interval) // judged lazily: it ended then
		c.nonEmptySince = now                        // the waiters present start a fresh interval
	}
	if q.n > 0 && now.Sub(c.nonEmptySince) >= c.standAfter(now) {
		c.overloaded = true
		c.lastShed = now // standing lasts at least an interval
		return true
	}
	return false
}

// recallIntervals is how many intervals after the queue stopped standing a
// target's worth of queueing makes it standing again.
const recallIntervals = 16

// standAfter returns how long the queue must be non-empty to be standing:
// an interval, or a target shortly after it last stood.
func (c *codel) standAfter(now time.Time) time.Duration {
	if !c.standingEnded.IsZero() && now.Sub(c.standingEnded) < recallIntervals*c.interval {
		return c.target
	}
	return c.interval
}

// shedLocked records that the engine shed an execution at now (a queue
// timeout, a purge, an eviction or a full queue), after removing it from q
// if it was queued: evidence that the overload goes on.
func (c *codel) shedLocked(q *waitQueue, now time.Time) {
	c.shedLockedPriority(q, now, false, 0)
}

// shedLockedPriority is shedLocked for an execution of known priority p
// (known is false for a newcomer rejected before its priority was
// computed).
func (c *codel) shedLockedPriority(q *waitQueue, now time.Time, known bool, p int) {
	if known && c.overloaded && (!c.recentWorse(now) || p > c.worstShed) {
		c.worstShed, c.worstShedAt = p, now
	}
	if c.overloaded && now.After(c.lastShed) {
		c.lastShed = now
	}
	if q.n == 0 {
		c.shedEmptyAt = now
	}
}

// purgeLocked rejects, oldest first, the waiters of a standing queue that
// have waited longer than the target, and reports whether the queue is
// standing. While waiters of several priorities queue, the best priority
// present is spared: a standing queue sheds the less important classes
// first, and the best class is judged only once it waits alone.
//
// In a fair queue, the waiters of flows within their share of the limit
// permits are spared too (see waitQueue.fairSpared).
func (c *codel) purgeLocked(q *waitQueue, now time.Time, limit int) bool {
	if !c.standing(q, now) {
		return false
	}
	spared, spare := c.protectedPriority(q, now)
	if q.flows != nil {
		q.flows.Pass()
	}
	for w := q.oldest; w != nil && now.Sub(w.queuedAt) > c.target; {
		next := w.newer
		if (!spare || w.priority != spared) && !q.fairSpared(w, now, c.interval, limit) {
			q.fairShed(w, now, limit)
			q.remove(w)
			w.state = waiterTimedOut
			close(w.ready)
			c.shedLockedPriority(q, now, true, w.priority)
		} else {
			q.fairKept(w)
		}
		w = next
	}
	return true
}

// recentWorse reports whether worstShed is recent enough to count.
func (c *codel) recentWorse(now time.Time) bool {
	return !c.worstShedAt.IsZero() && now.Sub(c.worstShedAt) < c.interval
}

// protectedPriority returns the best priority queued and true when a worse
// one is queued too or was shed within the last interval: the class CoDel
// spares.
func (c *codel) protectedPriority(q *waitQueue, now time.Time) (int, bool) {
	if len(q.lists) == 0 {
		return 0, false
	}
	best := q.lists[0].priority
	return best, len(q.lists) > 1 || (c.recentWorse(now) && c.worstShed > best)
}

// sparesNewcomer reports whether a newcomer of priority p joins the spared
// class: it is at least as good as every waiter, and a worse one is queued
// or was shed within the last interval. It keeps its configured queue
// timeout.
func (c *codel) sparesNewcomer(q *waitQueue, p int, now time.Time) bool {
	if len(q.lists) > 0 && p > q.lists[0].priority {
		return false
	}
	if len(q.lists) > 0 && q.lists[len(q.lists)-1].priority > p {
		return true
	}
	return c.recentWorse(now) && c.worstShed > p
}

// onPushLocked records the start of a non-empty period when a waiter joins
// an empty queue that is not standing.
func (c *codel) onPushLocked(q *waitQueue, now time.Time) {
	if q.n > 0 {
		return
	}
	if !c.overloaded && (c.shedEmptyAt.IsZero() || now.Sub(c.shedEmptyAt) >= c.interval) {
		c.nonEmptySince = now
	}
	c.shedEmptyAt = time.Time{}
}

// shorten returns the queue timeout for a waiter joining a standing queue.
func (c *codel) shorten(queueTimeout time.Duration) time.Duration {
	if queueTimeout == 0 || queueTimeout > c.target {
		return c.target
	}
	return queueTimeout
}
