package resilience

import "time"

// CoDelOptions turns on the CoDel queue discipline of a concurrency limiter
// (fixed or adaptive), after "Fail at Scale" (Facebook, ACM Queue 2015).
//
// A queue exists to absorb bursts. Under sustained overload it fills and
// stays full, and then every admitted execution first waits a whole
// queue's worth: with a queue as long as the permit limit, admitted latency
// doubles while throughput does not improve at all. CoDel tells the two
// apart by one signal: whether the queue has been empty at some point in
// the last Interval. If it has, the queue is absorbing a burst and behaves
// as configured. If it has not, the queue is standing, and then
//
//   - an execution that must queue gets Target as its queue timeout (if
//     that is shorter than QueueTimeout);
//   - a waiter that has already waited longer than Target is rejected with
//     ReasonQueueTimeout at the next queue operation instead of being
//     granted late, so the standing queue drains at once;
//   - with AdaptiveLIFO, freed permits go to the newest waiter of the best
//     priority, whose client is the most likely to still be waiting.
//
// Priorities still apply: a standing queue grants the best priority first,
// and while several priorities wait it sheds the others first: waiters of
// the best priority queued keep their configured queue timeout and are not
// rejected for waiting past Target until they wait alone, so a service
// whose permits free in bursts still serves its most important class in
// full while CoDel drains the rest.
//
// Use it when a queue is configured (QueueLimit > 0) and overload can last
// longer than a burst, which is the usual case for an inbound limiter. It
// costs nothing on the fast path (a free permit); queued executions read the
// clock once more. Leave it off for queues whose waits are meant to be long
// (a batch job waiting its turn), where a standing queue is the intent.
//
// The zero value of each field means its default.
type CoDelOptions struct {
	// Interval is how long the queue must have been non-empty before it
	// counts as standing; 0 means 100 ms.
	Interval time.Duration
	// Target is the queue timeout while the queue is standing; 0 means
	// 5 ms.
	Target time.Duration
	// AdaptiveLIFO grants the newest waiter (of the best priority) while the
	// queue is standing, instead of the oldest.
	AdaptiveLIFO bool
}

const (
	defaultCoDelInterval = 100 * time.Millisecond
	defaultCoDelTarget   = 5 * time.Millisecond
)

func validateCoDel(typeName string, o *CoDelOptions) error {
	if o == nil {
		return nil
	}
	if err := checkNonNegativeDuration(typeName+".CoDel.Interval", o.Interval); err != nil {
		return err
	}
	return checkNonNegativeDuration(typeName+".CoDel.Target", o.Target)
}

// codel is the state of the discipline inside a permitEngine, guarded by
// the engine's mutex.
type codel struct {
	interval time.Duration
	target   time.Duration
	lifo     bool

	// nonEmptySince is when the queue last went from empty to non-empty.
	nonEmptySince time.Time
	// purgedEmptyAt is set when a purge or an eviction, not service,
	// emptied the queue. A queue emptied by rejecting stale waiters, or by
	// evicting its only waiter for a newcomer, has not drained, so the next
	// push (if it comes within an interval) keeps the standing state instead
	// of starting a fresh interval with long timeouts.
	purgedEmptyAt time.Time
}

func newCoDel(o *CoDelOptions) *codel {
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

// standing reports whether q has been non-empty for at least an interval.
func (c *codel) standing(q *waitQueue, now time.Time) bool {
	return q.n > 0 && now.Sub(c.nonEmptySince) >= c.interval
}

// purgeLocked rejects, oldest first, the waiters of a standing queue that
// have waited longer than the target, and reports whether the queue was
// standing. While waiters of several priorities queue, the best priority
// present is spared: a standing queue sheds the less important classes
// first, and the best class is judged only once it waits alone.
func (c *codel) purgeLocked(q *waitQueue, now time.Time) bool {
	if !c.standing(q, now) {
		return false
	}
	spared, spare := protectedPriority(q)
	for w := q.oldest; w != nil && now.Sub(w.queuedAt) > c.target; {
		next := w.newer
		if !spare || w.priority != spared {
			q.remove(w)
			w.state = waiterTimedOut
			close(w.ready)
		}
		w = next
	}
	if q.n == 0 {
		c.purgedEmptyAt = now
	}
	return true
}

// protectedPriority returns the best priority queued and true when a worse
// one is queued too: the class CoDel spares.
func protectedPriority(q *waitQueue) (int, bool) {
	if len(q.lists) < 2 {
		return 0, false
	}
	return q.lists[0].priority, true
}

// sparesNewcomer reports whether a newcomer of priority p joins the spared
// class: it is at least as good as every waiter and a worse one is queued.
// It keeps its configured queue timeout.
func sparesNewcomer(q *waitQueue, p int) bool {
	return len(q.lists) > 0 && p <= q.lists[0].priority && q.lists[len(q.lists)-1].priority > p
}

// onEvictLocked is called after the overflow policy evicted a waiter to
// make room for a newcomer. If that emptied the queue (a queue of one), it
// is not the queue draining: the newcomer takes the place at once.
func (c *codel) onEvictLocked(q *waitQueue, now time.Time) {
	if q.n == 0 {
		c.purgedEmptyAt = now
	}
}

// onPushLocked records the start of a non-empty period when a waiter joins
// an empty queue.
func (c *codel) onPushLocked(q *waitQueue, now time.Time) {
	if q.n > 0 {
		return
	}
	if c.purgedEmptyAt.IsZero() || now.Sub(c.purgedEmptyAt) >= c.interval {
		c.nonEmptySince = now
	}
	c.purgedEmptyAt = time.Time{}
}

// shorten returns the queue timeout for a waiter joining a standing queue.
func (c *codel) shorten(queueTimeout time.Duration) time.Duration {
	if queueTimeout == 0 || queueTimeout > c.target {
		return c.target
	}
	return queueTimeout
}
