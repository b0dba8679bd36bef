// Eviction: who is shed when the queue is full or CoDel drops, and who
// is spared. Largest (the byLen max-heap, this file) is the flow using
// the most per weight, waiters counted with permits; Spared and
// WithinShare keep a flow that asks for well less than its share, with
// the demand windows (ask, roll, asksLess) that tell:
//
//	full queue / CoDel ─▶ Largest flow ─▶ its newest (or oldest) waiter is shed
//	                      unless Spared / WithinShare (under its share, not shed while over it)

package fair

import "time"

// Shed records that a waiter of f is being shed at now (rejected,
// evicted or timed out) from a limiter of limit permits; call it before
// removing the waiter.
func (t *Table[W]) Shed(f *Flow[W], now time.Time, limit int) {
	f.shedAt = now
	if !t.within(f.held+f.queued, f.weight, t.weights, limit) {
		f.overAt = now
	}
}

// ShedKey is Shed for a newcomer of flow key that was refused without
// queueing; a flow that is not active has no state to record it in.
func (t *Table[W]) ShedKey(key string, now time.Time, limit int) {
	if f := t.flows[key]; f != nil {
		t.ask(f)
		f.shedAt = now
		if !t.within(f.held+f.queued+1, f.weight, t.weights, limit) {
			f.overAt = now
		}
	}
}

// Spared reports whether flow key (active or not) asks for well less than
// the flow asking the most and has had no waiter shed within the last
// interval before now: its demand is being met, so it is not what makes a
// queue stand.
//
// Neither test alone will do. When permits are freed in bursts, a quiet
// flow's requests may wait long and it may hold more than a heavy flow
// for a while; only its demand over many requests tells it from a flow
// that asks for more than its share. And when every flow asks for more
// than its share, a flow that no shed happened to touch for an interval
// would keep the long queue timeout and build a standing queue of its
// own: its waiters would all be spared, while it was served no more than
// its share.
func (t *Table[W]) Spared(key string, now time.Time, interval time.Duration) bool {
	f := t.flows[key]
	if f == nil {
		// Its newcomer would be its only request counted, and that is
		// too many once a window has closed; see asksLess.
		return t.prevTopN == 0
	}
	return !recent(f.shedAt, now, interval) && t.asksLess(f)
}

// Pass starts a pass over the waiters, oldest first, for WithinShare and
// Kept.
func (t *Table[W]) Pass() { t.pass++ }

// WithinShare reports whether the queued waiter n is within its flow's
// fair share of limit permits, and the flow has had no waiter shed within
// the last interval before now: the flow's permits, its waiters already
// Kept in the current pass (those ahead of n, when the pass goes oldest
// first) and n itself come to at most limit × its weight / the active
// flows' weights. Fewest permits held first grants such a waiter before
// any waiter of a flow over its share, so it waits for the next permits
// to free, not for the standing queue: shedding it would take from a flow
// under its share what a flow over its share made scarce.
//
// A flow that had a waiter shed within the interval while it used more
// than its share (its permits and waiters together) asks for more than
// it gets: when every flow does, a flow's permits dip below its share
// now and then, and sparing it then would give its newest waiters the
// long queue timeout and a wait for the next permits to free in bursts.
// Sheds of a flow within its share do not count, so that a shed (a queue
// timeout, say) cannot hold a quiet flow's immediate re-sends to the
// target, to be shed in turn.
func (t *Table[W]) WithinShare(n *Node[W], limit int, now time.Time, interval time.Duration) bool {
	f := n.q.flow
	t.mark(f)
	return !recent(f.overAt, now, interval) && t.within(f.held+f.kept+1, f.weight, t.weights, limit)
}

// recent reports whether at is set and less than interval before now.
func recent(at, now time.Time, interval time.Duration) bool {
	return !at.IsZero() && now.Sub(at) < interval
}

// Kept records that the queued waiter n stays in the queue in the current
// pass, ahead of its flow's later waiters.
func (t *Table[W]) Kept(n *Node[W]) {
	f := n.q.flow
	t.mark(f)
	f.kept++
}

func (t *Table[W]) mark(f *Flow[W]) {
	if f.pass != t.pass {
		f.pass, f.kept = t.pass, 0
	}
}

// NewcomerWithinShare is WithinShare for a newcomer of flow key (weight
// as in Push) behind queued waiters of its flow at its priority: its
// flow's permits, those waiters and the newcomer, within the flow's
// share of limit permits.
func (t *Table[W]) NewcomerWithinShare(key string, weight, queued, limit int, now time.Time, interval time.Duration) bool {
	held, total := 0, t.weights
	w := clampWeight(weight)
	if f := t.flows[key]; f != nil {
		if recent(f.overAt, now, interval) {
			return false
		}
		held, w = f.held, f.weight
	} else {
		total += w // it becomes active
	}
	return t.within(held+queued+1, w, total, limit)
}

// within reports use × total < limit × w: use, strictly below the
// share, leaves a flow at its share in symmetric overload to CoDel (in floating point: the sum of
// the weights times a use could overflow).
func (t *Table[W]) within(use int, w, total int64, limit int) bool {
	return float64(use)*float64(total) < float64(limit)*float64(w)
}

// windowPerFlow is how many requests per active flow a window of the
// demand counts lasts (at least 8 flows' worth): enough that a flow
// asking as much as the heaviest one practically never counts less than
// half of it by chance (with Poisson arrivals, half of 128 is 5.7
// standard deviations below the mean).
const windowPerFlow = 128

// ask counts a request of f that was ranked: queued, refused, or given a
// permit that was free once it had been ranked.
func (t *Table[W]) ask(f *Flow[W]) {
	t.roll(f)
	t.asks++
	f.asked++
	if a := int64(f.asked); t.topN == 0 || a*t.topW > t.topN*f.weight {
		t.topN, t.topW = a, f.weight
	}
	n := windowPerFlow * max(len(t.flows), 8)
	if t.prevTopN == 0 {
		n /= 4 // a rough first judgement is better than none
	}
	if t.windowAsked++; t.windowAsked >= n {
		t.prevTopN, t.prevTopW, t.prevLen = t.topN, t.topW, int64(t.windowAsked)
		t.topN, t.topW = 0, 0
		t.window++
		t.windowAsked = 0
	}
}

// roll brings f's demand counts to the current window.
func (t *Table[W]) roll(f *Flow[W]) {
	if f.window == t.window {
		return
	}
	f.askedPrev = 0
	if f.window+1 == t.window {
		f.askedPrev = f.asked
	}
	f.asked, f.window = 0, t.window
}

// asksLess reports whether f asked, in the last whole window and so far in
// this one, less than half of what the flow asking the most asked in the
// last whole window, per weight: it is well below the water level of
// max-min fairness, where the flows that ask for more than their share
// all are. A flow active for less than a window is judged by its share
// of the requests since it became active. Only requests that were ranked
// are counted (a permit free at once is taken without), but which
// requests find none free does not depend on their flow, so the counts
// compare the flows' demand. Until a window has closed, every flow asks
// less.
//
// The demand is what is counted, not what the flow was served or shed:
// those depend on the sparing itself (a spared flow keeps its waiters and
// wins the grants of flows whose waiters timed out), and would keep a
// flow spared because it was.
func (t *Table[W]) asksLess(f *Flow[W]) bool {
	if t.prevTopN == 0 {
		return true
	}
	t.roll(f)
	if span := int64(t.asks - f.since); span < t.prevLen {
		// Active for less than a window (its counts went when it was last
		// idle): its share of the requests since it became active.
		// (In floating point: the cross product of four counts could
		// overflow.)
		return 2*float64(f.asked+f.askedPrev)*float64(t.prevLen)*float64(t.prevTopW) < float64(t.prevTopN)*float64(span)*float64(f.weight)
	}
	n := int64(max(f.asked, f.askedPrev))
	return 2*n*t.prevTopW < t.prevTopN*f.weight
}

// Largest returns the flow waiting at this level that uses the most of
// the limiter (its waiters here and its permits, per weight: the one fair
// shedding takes from), that use, and its oldest and newest waiter here;
// nil when the level is empty.
func (l *Level[W]) Largest() (f *Flow[W], use int, oldest, newest *Node[W]) {
	if len(l.byLen) == 0 {
		return nil, 0, nil, nil
	}
	q := l.byLen[0]
	return q.flow, q.n + q.flow.held, q.head, q.tail
}

// Use returns what flow key would use of the limiter with one more waiter
// at this level: its waiters here and its permits, plus one.
func (l *Level[W]) Use(key string) int {
	f := l.t.flows[key]
	if f == nil {
		return 1
	}
	n := 0
	if q := f.queueAt(l); q != nil {
		n = q.n
	}
	return n + f.held + 1
}

// Head returns the oldest waiter of flow key at this level, or nil.
func (l *Level[W]) Head(key string) *Node[W] {
	if f := l.t.flows[key]; f != nil {
		if q := f.queueAt(l); q != nil {
			return q.head
		}
	}
	return nil
}

// Queued returns how many waiters flow key has at this level.
func (l *Level[W]) Queued(key string) int {
	f := l.t.flows[key]
	if f == nil {
		return 0
	}
	if q := f.queueAt(l); q != nil {
		return q.n
	}
	return 0
}

// lenMore orders byLen: more waiters and permits held per weight first,
// then the newer tail.
func lenMore[W any](a, b *queue[W]) bool {
	x, y := int64(a.n+a.flow.held)*b.flow.weight, int64(b.n+b.flow.held)*a.flow.weight
	if x != y {
		return x > y
	}
	return a.tail.seq > b.tail.seq
}

func (l *Level[W]) swapLen(i, j int) {
	h := l.byLen
	h[i], h[j] = h[j], h[i]
	h[i].lenAt, h[j].lenAt = i, j
}

func (l *Level[W]) lenUp(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !lenMore(l.byLen[i], l.byLen[p]) {
			return
		}
		l.swapLen(i, p)
		i = p
	}
}

func (l *Level[W]) lenDown(i int) {
	h := l.byLen
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && lenMore(h[c+1], h[c]) {
			c++
		}
		if !lenMore(h[c], h[i]) {
			return
		}
		l.swapLen(i, c)
		i = c
	}
}
