package resilience

import (
	"context"
	"sort"
	"sync"
	"time"
)

// waiterState is the life of one queued Acquire. A waiter is created queued
// and leaves that state exactly once, always under the limiter's mutex, to
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
	waiterClosed                       // the limiter was closed
)

// waiter is one Acquire call waiting in a waitQueue. Fields other than
// ready are guarded by the limiter's mutex.
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

// waitQueue holds the waiters of a concurrency limiter, ordered by priority
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
// is bounded by the number of queued waiters, which the limiter caps at
// QueueLimit.
//
// The zero value is an empty queue. Not safe for concurrent use: the
// limiter's mutex guards it.
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

// permitEngine is the queue engine shared by ConcurrencyLimiter and
// AdaptiveLimiter: a permit count, a limit and a waitQueue under one mutex,
// with the overflow policies, queue timeouts and the optional CoDel
// discipline. The limiters differ only in who sets the limit (the user
// through SetLimit, or a limit.Algorithm) and in what a release records.
//
// The zero value has a limit of 0 and no queue: it rejects everything.
// Not copyable after first use.
type permitEngine struct {
	queueLimit   int
	queueTimeout time.Duration
	priority     func(ctx context.Context) int
	overflow     OverflowPolicy
	codel        *codel // nil: no CoDel discipline

	mu       sync.Mutex
	limit    int
	inFlight int
	queue    waitQueue
	closed   bool // Close: nothing is admitted or queued any more
}

// close rejects every waiter with ReasonShuttingDown and stops admission.
func (e *permitEngine) close() {
	e.mu.Lock()
	e.closed = true
	for w := e.queue.popBest(); w != nil; w = e.queue.popBest() {
		w.state = waiterClosed
		close(w.ready)
	}
	e.mu.Unlock()
}

// stats returns a consistent snapshot.
func (e *permitEngine) stats() LimiterStats {
	e.mu.Lock()
	s := LimiterStats{Limit: e.limit, InFlight: e.inFlight, Queued: e.queue.len()}
	e.mu.Unlock()
	return s
}

// setLimitLocked changes the limit and grants what it frees. A lower limit
// interrupts nothing: admission resumes once in-flight falls below it.
func (e *permitEngine) setLimitLocked(n int) {
	e.limit = n
	e.grantLocked()
}

// tryAcquire takes a free permit without queueing.
func (e *permitEngine) tryAcquire() bool {
	e.mu.Lock()
	// inFlight < limit implies an empty queue: grantLocked never leaves a
	// waiter queued while a permit is free.
	ok := e.inFlight < e.limit && !e.closed
	if ok {
		e.inFlight++
	}
	e.mu.Unlock()
	return ok
}

// acquire takes a permit, queueing if the options allow, and reports how
// long the execution waited in the queue, admitted or rejected (0 when it
// did not queue; at least 1 ns when it did), for telemetry. tel, when
// not nil, reports a panic of the Priority function (see reportHookPanic).
func (e *permitEngine) acquire(ctx context.Context, tel *Telemetry) (time.Duration, error) {
	if ctx.Err() != nil {
		return 0, context.Cause(ctx)
	}
	e.mu.Lock()
	if e.inFlight < e.limit && !e.closed { // implies an empty queue; see tryAcquire
		e.inFlight++
		e.mu.Unlock()
		return 0, nil
	}
	return e.acquireSlowLocked(ctx, tel)
}

// acquireSlowLocked is acquire once no permit was free: it sheds or
// queues. It is called with e.mu held and releases it. The adaptive
// limiter calls it after its own fast path, which also decides under the
// same lock whether to time the execution.
func (e *permitEngine) acquireSlowLocked(ctx context.Context, tel *Telemetry) (time.Duration, error) {
	if e.closed {
		e.mu.Unlock()
		return 0, errBulkheadShuttingDown
	}
	if e.queueLimit == 0 || (e.overflow == OverflowRejectNew && e.queue.len() >= e.queueLimit && !e.purgeFullLocked()) {
		// Shed without running the priority function: under overload this
		// is the common case and should cost as little as possible.
		e.mu.Unlock()
		return 0, errBulkheadFull
	}
	if e.priority == nil {
		return e.wait(ctx, 0) // wait unlocks
	}
	// The priority function is the caller's code: run it without the lock,
	// then look again, since a permit may have been freed meanwhile.
	e.mu.Unlock()
	p := callPriority(ctx, tel, e.priority)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return 0, errBulkheadShuttingDown
	}
	if e.inFlight < e.limit {
		e.inFlight++
		e.mu.Unlock()
		return 0, nil
	}
	if ctx.Err() != nil {
		// The caller left while its priority was computed: it must not
		// queue, let alone evict a live waiter.
		e.mu.Unlock()
		return 0, context.Cause(ctx)
	}
	return e.wait(ctx, p)
}

// wait queues the caller with priority p, applying the overflow policy if
// the queue is full, and waits for the outcome. It is called with e.mu held
// and releases it.
func (e *permitEngine) wait(ctx context.Context, p int) (time.Duration, error) {
	start := time.Now()
	timeoutAfter := e.queueTimeout
	if e.codel != nil && e.codel.purgeLocked(&e.queue, start) && !e.codel.sparesNewcomer(&e.queue, p, start) {
		// The queue is standing: newcomers get the short target as their
		// queue timeout, so a standing queue drains (the spared best class
		// excepted).
		timeoutAfter = e.codel.shorten(timeoutAfter)
	}
	if e.queue.len() >= e.queueLimit {
		var victim *waiter
		switch e.overflow {
		case OverflowDropOldest:
			victim = e.queue.oldestWaiter()
		case OverflowDropLowestPriority:
			if v := e.queue.newestOfLowest(); v != nil && p < v.priority {
				victim = v
			}
		}
		if victim == nil {
			if e.codel != nil {
				e.codel.shedLockedPriority(&e.queue, start, true, p)
			}
			e.mu.Unlock()
			return 0, errBulkheadFull
		}
		e.queue.remove(victim)
		victim.state = waiterEvicted
		close(victim.ready)
		if e.codel != nil {
			e.codel.shedLockedPriority(&e.queue, start, true, victim.priority)
		}
	}
	w := &waiter{priority: p, queuedAt: start, ready: make(chan struct{})}
	if e.codel != nil {
		e.codel.onPushLocked(&e.queue, start)
	}
	e.queue.push(w)
	e.mu.Unlock()

	var timeout <-chan time.Time
	if timeoutAfter > 0 {
		t := time.NewTimer(timeoutAfter)
		defer t.Stop()
		timeout = t.C
	}

	var ended waiterState // what this goroutine saw end the wait, if not ready
	select {
	case <-w.ready:
		// The granter, evicter or CoDel purge set w.state before closing
		// ready.
	case <-ctx.Done():
		ended = waiterCancelled
	case <-timeout:
		ended = waiterTimedOut
	}
	if ended != waiterQueued {
		e.mu.Lock()
		if w.state == waiterQueued { // nobody granted or evicted it first
			e.queue.remove(w)
			w.state = ended
			if ended == waiterTimedOut && e.codel != nil {
				e.codel.shedLockedPriority(&e.queue, time.Now(), true, w.priority)
			}
		}
		e.mu.Unlock()
	}
	// w.state is final now and nobody writes it again, so it is read
	// without the lock (the close of ready or the mutex orders the write).

	switch w.state {
	case waiterGranted:
		// A grant racing the queue timeout wins: the permit is in hand. A
		// grant racing the caller's cancellation is handed on instead, since
		// nobody waits for the result.
		if ctx.Err() != nil {
			e.mu.Lock()
			e.releaseLocked()
			e.mu.Unlock()
			return time.Since(start), context.Cause(ctx)
		}
		// At least 1 ns: a wait that took no measurable time (a fake
		// clock) is still a wait.
		return max(time.Since(start), 1), nil
	case waiterEvicted:
		return time.Since(start), errBulkheadDropped
	case waiterTimedOut:
		return time.Since(start), errBulkheadQueueTimeout
	case waiterClosed:
		return time.Since(start), errBulkheadShuttingDown
	default: // waiterCancelled
		return time.Since(start), context.Cause(ctx)
	}
}

// purgeFullLocked is called when a reject-new queue is full: under CoDel
// it rejects the stale waiters of a standing queue and reports whether
// that made room. Without CoDel it reports false at no cost.
func (e *permitEngine) purgeFullLocked() bool {
	if e.codel == nil {
		return false
	}
	now := time.Now()
	e.codel.purgeLocked(&e.queue, now)
	if e.queue.len() < e.queueLimit {
		return true
	}
	e.codel.shedLocked(&e.queue, now) // the newcomer is rejected
	return false
}

// releaseLocked returns one permit, passing it to the best waiter if there
// is one. It reports false, changing nothing, when no permit is held.
// e.mu must be held.
func (e *permitEngine) releaseLocked() bool {
	if e.inFlight <= 0 {
		return false
	}
	e.inFlight--
	if e.queue.n > 0 {
		e.grantLocked()
	}
	return true
}

// grantLocked moves free permits to the best waiters. e.mu must be held.
func (e *permitEngine) grantLocked() {
	if e.inFlight >= e.limit || e.queue.n == 0 {
		return
	}
	lifo := false
	if e.codel != nil {
		// Only the slow path (someone is queued) reads the clock.
		lifo = e.codel.purgeLocked(&e.queue, time.Now()) && e.codel.lifo
	}
	for e.inFlight < e.limit {
		w := e.queue.best()
		if lifo {
			w = e.queue.newestOfBest()
		}
		if w == nil {
			return
		}
		e.queue.remove(w)
		w.state = waiterGranted
		e.inFlight++
		close(w.ready)
	}
}

// callPriority runs the Priority function, reporting a panic of it on tel
// (nil: not reported) before it goes on to the execution's caller.
func callPriority(ctx context.Context, tel *Telemetry, priority func(context.Context) int) int {
	if tel != nil {
		defer reportHookPanic(ctx, tel, HookPriority)
	}
	return priority(ctx)
}
