package queue

import "time"

// Settings are the parts of an Engine's Options that can change while it
// is in use (Reconfigure): everything but Fair, which decides the queue's
// layout.
type Settings struct {
	Limit        int
	QueueLimit   int           // 0: no queue
	QueueTimeout time.Duration // 0: none
	Overflow     Overflow
	CoDel        *CoDel // nil: plain queue
}

// Reconfigure changes the limit, the queue's size, its timeout, the
// overflow policy and the CoDel discipline at once, under the engine's
// lock, and returns how many waiters it evicted. It interrupts nothing
// that runs:
//
//   - A lower limit stops admission until in flight falls below it; a
//     higher one grants queued waiters at once.
//   - A queue shrunk below its length evicts the excess, worst first (the
//     newest waiter of the lowest priority, as a full drop-lowest-priority
//     queue sheds; in a fair queue, of the flow using the most): each such
//     waiter ends Dropped, by the one transition of its state that an
//     eviction makes (waiterEvicted), so it is answered once, by its own
//     Acquire, and counted as an eviction is.
//   - A new queue timeout applies to waiters that queue from now on; those
//     already waiting keep the timer they started with.
//   - CoDel turned on starts with a queue judged not standing; turned off,
//     its state is dropped; with new parameters, its state is kept.
//
// A closed engine takes the settings but admits nothing.
func (e *Engine) Reconfigure(s Settings) (evicted int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ReconfigureLocked(s)
}

// ReconfigureLocked is Reconfigure with the engine locked, for a limiter
// that changes its own state under the same lock.
func (e *Engine) ReconfigureLocked(s Settings) (evicted int) {
	e.limit = s.Limit
	e.queueLimit = s.QueueLimit
	e.queueTimeout = s.QueueTimeout
	e.overflow = s.Overflow
	switch {
	case s.CoDel == nil:
		e.codel = nil
	case e.codel == nil:
		e.codel = newCoDel(s.CoDel)
	default:
		c := newCoDel(s.CoDel) // the defaults applied
		e.codel.interval, e.codel.target, e.codel.lifo = c.interval, c.target, c.lifo
	}
	if e.queue.len() > e.queueLimit {
		now := time.Now()
		for e.queue.len() > e.queueLimit {
			victim := e.queue.newestOfLowest()
			if e.codel != nil {
				e.queue.fairShed(victim, now, e.limit)
			}
			e.queue.remove(victim)
			victim.state = waiterEvicted
			close(victim.ready)
			if e.codel != nil {
				e.codel.shedLockedPriority(&e.queue, now, true, victim.priority)
			}
			evicted++
		}
	}
	e.grantLocked()
	return evicted
}

// QueueLimitLocked returns the queue's size in force.
func (e *Engine) QueueLimitLocked() int { return e.queueLimit }
