// Package queue is the queue engine of the concurrency limiters: a permit
// count and a limit, a priority wait queue, the overflow policies, queue
// timeouts and the CoDel discipline, and optionally fair queuing between
// flows (package fair), under one mutex. The fixed
// ConcurrencyLimiter and the AdaptiveLimiter of package resilience are
// both an Engine; they differ only in who moves the limit and in what a
// release records. The public options, errors and events stay in package
// resilience, which translates them.
package queue

import (
	"context"
	"sync"
	"time"

	"github.com/ylcnfrht/resilience/core/internal/fair"
)

// Overflow says what Acquire does when it must queue and the queue is
// full.
type Overflow uint8

const (
	// RejectNew rejects the newcomer (Full).
	RejectNew Overflow = iota
	// DropOldest evicts the waiter that has waited longest (Dropped) and
	// queues the newcomer.
	DropOldest
	// DropLowestPriority evicts the newest waiter of the largest priority
	// number if the newcomer outranks it, and otherwise rejects the
	// newcomer.
	DropLowestPriority
)

// Options configures an Engine; Init takes them already validated.
type Options struct {
	Limit        int
	QueueLimit   int           // 0: no queue
	QueueTimeout time.Duration // 0: none; ignored without a queue
	Overflow     Overflow
	CoDel        *CoDel // nil: plain queue; ignored without a queue
	// Fair orders each priority's waiters between flows (see package
	// fair) and sheds from the flow with the most queued; callers rank
	// with AcquireRanked. Ignored without a queue.
	Fair bool
}

// Rank is where a caller that must queue waits: its priority (lower is
// granted sooner) and, in a fair engine, its flow and the flow's weight
// (used when the flow becomes active).
type Rank struct {
	Priority int
	Flow     string
	Weight   int
}

// CoDel configures the CoDel discipline (see the CoDelOptions of package
// resilience for what it does); a zero field means its default.
type CoDel struct {
	Interval     time.Duration
	Target       time.Duration
	AdaptiveLIFO bool
}

// Result is how an Acquire ended.
type Result uint8

const (
	Admitted     Result = iota // a permit is held
	Full                       // no permit and no room in the queue
	QueueTimeout               // waited the queue timeout (or CoDel's target)
	Dropped                    // evicted by the overflow policy
	ShuttingDown               // the engine was closed
	Cancelled                  // the context ended first: the caller's doing
)

// Engine is a permit count, a limit and a waitQueue under one mutex.
//
// The zero value has a limit of 0 and no queue: it rejects everything
// with Full. Not copyable after first use. The methods named ...Locked
// must be called with the engine locked (Lock); the others lock it
// themselves. A limiter may guard its own state with the same lock.
type Engine struct {
	queueLimit   int
	queueTimeout time.Duration
	overflow     Overflow
	codel        *codel // nil: no CoDel discipline

	mu       sync.Mutex
	limit    int
	inFlight int
	queue    waitQueue
	closed   bool // Close: nothing is admitted or queued any more
}

// Init sets up a new engine from validated options, applying the
// defaults.
func (e *Engine) Init(o Options) {
	e.limit = o.Limit
	e.queueLimit = o.QueueLimit
	e.overflow = o.Overflow
	if o.QueueLimit > 0 {
		e.queueTimeout = o.QueueTimeout
		e.codel = newCoDel(o.CoDel)
		if o.Fair {
			e.queue.flows = new(fair.Table[*waiter])
		}
	}
}

// Lock locks the engine, for the ...Locked methods.
func (e *Engine) Lock() { e.mu.Lock() }

// Unlock unlocks the engine.
func (e *Engine) Unlock() { e.mu.Unlock() }

// Close rejects every waiter with ShuttingDown and stops admission.
func (e *Engine) Close() {
	e.mu.Lock()
	e.closed = true
	for w := e.queue.popBest(); w != nil; w = e.queue.popBest() {
		w.state = waiterClosed
		close(w.ready)
	}
	e.mu.Unlock()
}

// Stats returns a consistent snapshot of the limit, the permits held and
// the waiters queued.
func (e *Engine) Stats() (limit, inFlight, queued int) {
	e.mu.Lock()
	limit, inFlight, queued = e.limit, e.inFlight, e.queue.len()
	e.mu.Unlock()
	return limit, inFlight, queued
}

// FlowStats returns the number of active flows (with a waiter or a
// permit counted to them) and the share of the permits in flight that the
// flow holding the most holds; zeros in an engine that is not fair.
func (e *Engine) FlowStats() (active int, largestShare float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.queue.flows
	if t == nil {
		return 0, 0
	}
	active = t.Active()
	if e.inFlight > 0 {
		largestShare = float64(t.MaxHeld()) / float64(e.inFlight)
	}
	return active, largestShare
}

// FlowHeldLocked returns the permits counted to flow key: 0 when it is
// not active or the engine is not fair.
func (e *Engine) FlowHeldLocked(key string) int {
	if e.queue.flows == nil {
		return 0
	}
	if f := e.queue.flows.Lookup(key); f != nil {
		return f.Held()
	}
	return 0
}

// LimitLocked returns the limit.
func (e *Engine) LimitLocked() int { return e.limit }

// InFlightLocked returns the number of permits held.
func (e *Engine) InFlightLocked() int { return e.inFlight }

// QueuedLocked returns the number of waiters queued.
func (e *Engine) QueuedLocked() int { return e.queue.n }

// SetLimitLocked changes the limit and grants what it frees. A lower limit
// interrupts nothing: admission resumes once in-flight falls below it.
func (e *Engine) SetLimitLocked(n int) {
	e.limit = n
	e.grantLocked()
}

// FreeLocked reports whether a permit is free, nobody waits and the
// engine is open. Permits can be free while a waiter is queued: a costly
// waiter at the head waits until enough are (see cost.go), and a newcomer
// must not overtake it.
func (e *Engine) FreeLocked() bool { return e.inFlight < e.limit && e.queue.n == 0 && !e.closed }

// TakeLocked takes a permit that FreeLocked reported free.
func (e *Engine) TakeLocked() { e.inFlight++ }

// TryAcquire takes a free permit without queueing.
func (e *Engine) TryAcquire() bool {
	e.mu.Lock()
	ok := e.FreeLocked()
	if ok {
		e.inFlight++
	}
	e.mu.Unlock()
	return ok
}

// Acquire takes a permit, queueing if the options allow, and reports how
// long the caller waited in the queue, admitted or rejected (0 when it did
// not queue; at least 1 ns when it did), for telemetry. rank, when not
// nil, gives the priority of a caller that must queue (lower is granted
// sooner); it is called at most once, outside the lock, and only when the
// caller would queue. nil ranks every caller 0.
func (e *Engine) Acquire(ctx context.Context, rank func(context.Context) int) (time.Duration, Result) {
	if ctx.Err() != nil {
		return 0, Cancelled
	}
	e.mu.Lock()
	if e.FreeLocked() {
		e.inFlight++
		e.mu.Unlock()
		return 0, Admitted
	}
	return e.AcquireSlowLocked(ctx, rank)
}

// AcquireRanked is Acquire for an engine that may be fair: rank (nil:
// the zero Rank) places a caller that must queue, or that a full fair
// queue would shed, and is called at most once, outside the lock. With
// hold, a permit from the queue (or taken once rank has run) is counted to
// the caller's flow, returned for ReleaseFlowLocked; without, or when the
// permit was free at once, the returned flow is nil.
func (e *Engine) AcquireRanked(ctx context.Context, rank func(context.Context) Rank, hold bool) (time.Duration, Result, *Flow) {
	if ctx.Err() != nil {
		return 0, Cancelled, nil
	}
	e.mu.Lock()
	if e.FreeLocked() {
		e.inFlight++
		e.mu.Unlock()
		return 0, Admitted, nil
	}
	return e.AcquireRankedSlowLocked(ctx, rank, hold)
}

// AcquireRankedSlowLocked is AcquireRanked once no permit was free, as
// AcquireSlowLocked is for Acquire. It is called locked and unlocks.
func (e *Engine) AcquireRankedSlowLocked(ctx context.Context, rank func(context.Context) Rank, hold bool) (time.Duration, Result, *Flow) {
	waited, r, h := e.acquireSlow(ctx, nil, rank, hold, 1)
	return waited, r, h.Flow
}

// AcquireSlowLocked is Acquire once no permit was free: it sheds or
// queues. It is called locked and unlocks. The adaptive limiter calls it
// after its own fast path, which also decides under the same lock whether
// to time the execution.
func (e *Engine) AcquireSlowLocked(ctx context.Context, rank func(context.Context) int) (time.Duration, Result) {
	waited, r, _ := e.acquireSlow(ctx, rank, nil, false, 1)
	return waited, r
}

// acquireSlow is the slow path of every Acquire form: priority ranks by
// priority alone, rank by a whole Rank (at most one is set); cost is the
// permits the caller asks for (1 but for a costly request, see cost.go).
// It is called locked and unlocks.
func (e *Engine) acquireSlow(ctx context.Context, priority func(context.Context) int, rank func(context.Context) Rank, hold bool, cost int) (time.Duration, Result, Held) {
	if e.closed {
		e.mu.Unlock()
		return 0, ShuttingDown, Held{}
	}
	// A fair queue must know the newcomer's flow to shed fairly; any
	// other sheds without ranking: under overload this is the common case
	// and should cost as little as possible.
	if e.queueLimit == 0 || (e.overflow == RejectNew && e.queue.flows == nil && e.queue.len() >= e.queueLimit && !e.purgeFullLocked()) {
		e.mu.Unlock()
		return 0, Full, Held{}
	}
	if priority == nil && rank == nil {
		return e.wait(ctx, Rank{}, hold, cost) // wait unlocks
	}
	// rank is the caller's code: run it without the lock, then look again,
	// since a permit may have been freed meanwhile.
	e.mu.Unlock()
	var r Rank
	if rank != nil {
		r = rank(ctx)
	} else {
		r.Priority = priority(ctx)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return 0, ShuttingDown, Held{}
	}
	if n := e.need(cost); e.queue.n == 0 && e.inFlight+n <= e.limit {
		e.inFlight += n
		h := Held{N: n}
		if hold && e.queue.flows != nil {
			h.Flow = e.queue.flows.HoldN(r.Flow, r.Weight, n)
		}
		e.mu.Unlock()
		return 0, Admitted, h
	}
	if ctx.Err() != nil {
		// The caller left while it was ranked: it must not queue, let alone
		// evict a live waiter.
		e.mu.Unlock()
		return 0, Cancelled, Held{}
	}
	return e.wait(ctx, r, hold, cost)
}

// wait queues the caller with priority p, applying the overflow policy if
// the queue is full, and waits for the outcome. It is called locked and
// unlocks.
func (e *Engine) wait(ctx context.Context, r Rank, hold bool, cost int) (time.Duration, Result, Held) {
	p := r.Priority
	start := time.Now()
	timeoutAfter := e.queueTimeout
	if e.codel != nil && e.codel.purgeLocked(&e.queue, start, e.limit) && !e.codel.sparesNewcomer(&e.queue, p, start) && !e.queue.fairSparesNewcomer(r, start, e.codel.interval, e.limit) {
		// The queue is standing: newcomers get the short target as their
		// queue timeout, so a standing queue drains (the spared best class
		// excepted).
		timeoutAfter = e.codel.shorten(timeoutAfter)
	}
	if e.queue.len() >= e.queueLimit {
		var victim *waiter
		switch {
		case e.queue.flows != nil:
			victim = e.queue.fairVictim(r, e.overflow)
		case e.overflow == DropOldest:
			victim = e.queue.oldestWaiter()
		case e.overflow == DropLowestPriority:
			if v := e.queue.newestOfLowest(); v != nil && p < v.priority {
				victim = v
			}
		}
		if victim == nil {
			if e.codel != nil {
				if e.queue.flows != nil {
					e.queue.flows.ShedKey(r.Flow, start, e.limit)
				}
				e.codel.shedLockedPriority(&e.queue, start, true, p)
			}
			e.regrantLocked() // CoDel's purge above may have taken a costly head
			e.mu.Unlock()
			return 0, Full, Held{}
		}
		if e.codel != nil {
			e.queue.fairShed(victim, start, e.limit)
		}
		e.queue.remove(victim)
		victim.state = waiterEvicted
		close(victim.ready)
		if e.codel != nil {
			e.codel.shedLockedPriority(&e.queue, start, true, victim.priority)
		}
	}
	w := &waiter{priority: p, queuedAt: start, ready: make(chan struct{}), flow: r.Flow, weight: r.Weight, hold: hold, cost: cost}
	if e.codel != nil {
		e.codel.onPushLocked(&e.queue, start)
	}
	e.queue.push(w)
	if e.inFlight < e.limit {
		// Permits are free only while a costly waiter is held back for
		// more (see cost.go): a newcomer that now heads the queue, by
		// priority, may fit.
		e.grantLocked()
	}
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
			var now time.Time
			if ended == waiterTimedOut && e.codel != nil {
				now = time.Now()
				e.queue.fairShed(w, now, e.limit)
			}
			e.queue.remove(w)
			w.state = ended
			if ended == waiterTimedOut && e.codel != nil {
				e.codel.shedLockedPriority(&e.queue, now, true, w.priority)
			}
			if e.inFlight < e.limit {
				// w may have been a costly head holding the others back.
				e.grantLocked()
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
			e.ReleaseNLocked(w.held, w.cost)
			e.mu.Unlock()
			return time.Since(start), Cancelled, Held{}
		}
		// At least 1 ns: a wait that took no measurable time (a fake
		// clock) is still a wait.
		return max(time.Since(start), 1), Admitted, Held{Flow: w.held, N: w.cost}
	case waiterEvicted:
		return time.Since(start), Dropped, Held{}
	case waiterTimedOut:
		return time.Since(start), QueueTimeout, Held{}
	case waiterClosed:
		return time.Since(start), ShuttingDown, Held{}
	default: // waiterCancelled
		return time.Since(start), Cancelled, Held{}
	}
}

// purgeFullLocked is called when a reject-new queue is full: under CoDel
// it rejects the stale waiters of a standing queue and reports whether
// that made room. Without CoDel it reports false at no cost.
func (e *Engine) purgeFullLocked() bool {
	if e.codel == nil {
		return false
	}
	now := time.Now()
	e.codel.purgeLocked(&e.queue, now, e.limit)
	if e.queue.len() < e.queueLimit {
		return true
	}
	e.codel.shedLocked(&e.queue, now) // the newcomer is rejected
	e.regrantLocked()                 // the purge may have taken a costly head
	return false
}

// ReleaseLocked returns one permit, passing it to the best waiter if there
// is one. It reports false, changing nothing, when no permit is held.
func (e *Engine) ReleaseLocked() bool {
	if e.inFlight <= 0 {
		return false
	}
	e.inFlight--
	if e.queue.n > 0 {
		e.grantLocked()
	}
	return true
}

// ReleaseFlowLocked is ReleaseLocked for a permit counted to flow f (nil:
// to none), as AcquireRanked returned it: the flow gives the permit up
// before it passes on, so the grant sees the flow's new share.
func (e *Engine) ReleaseFlowLocked(f *Flow) bool {
	if e.inFlight <= 0 {
		return false
	}
	if f != nil {
		e.queue.flows.Release(f)
	}
	return e.ReleaseLocked()
}

// ReleaseFlow is ReleaseFlowLocked under the lock.
func (e *Engine) ReleaseFlow(f *Flow) bool {
	e.mu.Lock()
	ok := e.ReleaseFlowLocked(f)
	e.mu.Unlock()
	return ok
}

// Release is ReleaseLocked under the lock.
func (e *Engine) Release() bool {
	e.mu.Lock()
	ok := e.ReleaseLocked()
	e.mu.Unlock()
	return ok
}

// grantLocked moves free permits to the best waiters.
func (e *Engine) grantLocked() {
	if e.inFlight >= e.limit || e.queue.n == 0 {
		return
	}
	lifo := false
	if e.codel != nil {
		// Only the slow path (someone is queued) reads the clock.
		lifo = e.codel.purgeLocked(&e.queue, time.Now(), e.limit) && e.codel.lifo
	}
	for e.inFlight < e.limit {
		w := e.queue.best()
		if lifo {
			w = e.queue.newestOfBest()
		}
		if w == nil {
			return
		}
		// Head-of-line: a waiter that needs more permits than are free
		// waits for them, and so does everyone behind it (see cost.go).
		n := e.need(w.cost)
		if e.inFlight+n > e.limit {
			return
		}
		w.cost = n // what it holds, and returns
		e.queue.grant(w)
		w.state = waiterGranted
		e.inFlight += n
		close(w.ready)
	}
}
