package queue

import (
	"context"
	"time"
)

// Costly requests. A request may cost more than one permit (an export
// costs as much as many reads): it takes cost permits at once, and gives
// them back at once. The rules, the same on every path:
//
//   - A cost below 1 counts as 1; a cost above the limit takes the whole
//     limit (it runs alone), the limit read when the permits are taken,
//     so a limit lowered while the request waits cannot strand it.
//   - Head-of-line: the waiter the queue's order puts first (priority,
//     then fairness between flows, then arrival) is granted when its
//     permits are free, and nobody behind it is granted before it: a
//     cheap request never overtakes a costly one, so the costly one is
//     never starved, and the permits that free meanwhile stay unused
//     until it fits. A newcomer of a better priority goes ahead of it,
//     as it would of any waiter.
//   - A fair queue charges a flow every permit its requests hold (see
//     package fair): a tenant's share is counted in permits, not
//     requests.
//
// The one-owner discipline of the waiter states is unchanged: the
// granter moves cost permits to the waiter in the one transition to
// granted, and records them in the waiter (w.cost) for whoever returns
// them.

// Held is what an acquire that may cost more than one permit holds: N
// permits (what the cost came to, clamped to the limit), counted to Flow
// when that is not nil. Release it with ReleaseN.
type Held struct {
	Flow *Flow
	N    int
}

// need is what a request of cost n takes under the current limit: at
// least 1, at most the limit.
func (e *Engine) need(n int) int { return max(min(n, e.limit), 1) }

// TryAcquireN takes cost permits if they are free and nobody waits, and
// returns how many it took (cost clamped), or false.
func (e *Engine) TryAcquireN(cost int) (int, bool) {
	e.mu.Lock()
	n := e.need(cost)
	ok := e.queue.n == 0 && e.inFlight+n <= e.limit && !e.closed
	if ok {
		e.inFlight += n
	}
	e.mu.Unlock()
	return n, ok
}

// AcquireN is AcquireRanked for a request of cost permits: rank (nil:
// the zero Rank) places it if it must queue, and, with hold, the permits
// from the queue are counted to its flow. It reports the wait as Acquire
// does.
func (e *Engine) AcquireN(ctx context.Context, rank func(context.Context) Rank, hold bool, cost int) (time.Duration, Result, Held) {
	if ctx.Err() != nil {
		return 0, Cancelled, Held{}
	}
	e.mu.Lock()
	if n := e.need(cost); e.queue.n == 0 && e.inFlight+n <= e.limit && !e.closed {
		e.inFlight += n
		e.mu.Unlock()
		return 0, Admitted, Held{N: n}
	}
	return e.acquireSlow(ctx, nil, rank, hold, cost)
}

// AcquirePriorityN is AcquireN for an engine that is not fair, ranked by
// priority alone (nil: every caller 0), as Acquire is.
func (e *Engine) AcquirePriorityN(ctx context.Context, priority func(context.Context) int, cost int) (time.Duration, Result, Held) {
	if ctx.Err() != nil {
		return 0, Cancelled, Held{}
	}
	e.mu.Lock()
	if n := e.need(cost); e.queue.n == 0 && e.inFlight+n <= e.limit && !e.closed {
		e.inFlight += n
		e.mu.Unlock()
		return 0, Admitted, Held{N: n}
	}
	return e.acquireSlow(ctx, priority, nil, false, cost)
}

// regrantLocked grants what it can after waiters left the queue other
// than by a grant: one of them may have been a costly head holding back
// waiters that fit. Without costs no permit is free while anyone waits,
// and it costs one comparison.
func (e *Engine) regrantLocked() {
	if e.inFlight < e.limit && e.queue.n > 0 {
		e.grantLocked()
	}
}

// ReleaseNLocked returns n permits counted to f (nil: to none), as an
// acquire's Held says, and grants what they free. It reports false,
// changing nothing, when fewer than n are held.
func (e *Engine) ReleaseNLocked(f *Flow, n int) bool {
	n = max(n, 1)
	if e.inFlight < n {
		return false
	}
	if f != nil {
		e.queue.flows.ReleaseN(f, n)
	}
	e.inFlight -= n
	if e.queue.n > 0 {
		e.grantLocked()
	}
	return true
}

// ReleaseN is ReleaseNLocked under the lock.
func (e *Engine) ReleaseN(h Held) bool {
	e.mu.Lock()
	ok := e.ReleaseNLocked(h.Flow, h.N)
	e.mu.Unlock()
	return ok
}
