// Package fair orders the waiters of a concurrency limiter fairly between
// flows (tenants, API keys, clients) that share one priority.
//
// The discipline is "fewest permits held first": when a permit frees, it
// goes to the waiting flow that holds the fewest permits per unit of
// weight, and among flows that hold equally many, to the one whose last
// permit is the least recent (round robin); within a flow, waiters keep
// their arrival order. A concurrency limiter shares permits, and a flow's use of that
// resource at any moment is the permits it holds, so this is max-min
// fairness of the resource itself. Its integral over time is the
// permit-time a flow has used: a flow whose requests run long holds more
// permits and waits behind the others, without the limiter reading a
// clock or keeping a usage history to bound or decay (fair queuing by
// virtual time needs both, and needs the cost of a request before it
// runs). The round-robin tie-break makes flows that hold the same share
// take turns however deep their backlogs, so no waiting flow is starved:
// once the permits it held have finished, it is granted before any flow
// gets a second turn.
//
// Shedding takes from the other end: the flow with the most waiters per
// unit of weight (Level.Largest).
//
// State lives only while a flow waits or holds a permit: a Flow leaves its
// Table when it has neither, so memory is bounded by the limiter's permit
// and queue limits, however many distinct keys arrive. Every operation is
// O(log F) in the number F of flows waiting at a priority, or O(1).
//
// Nothing here is safe for concurrent use: the limiter's mutex guards a
// Table and everything in it.
package fair

import "time"

// MaxWeight is the largest weight a flow can have; larger values count as
// MaxWeight, and values below 1 as 1. It keeps the cross products of the
// comparisons far from overflow.
const MaxWeight = 1 << 20

// Node is one waiter's place in a flow's queue, embedded in (or pointed to
// by) the caller's waiter; Value points back to it. The zero Node is not
// queued.
type Node[W any] struct {
	Value      W
	q          *queue[W]
	prev, next *Node[W]
	seq        uint64 // arrival order, across the whole table
}

// Flow is one flow while it is active: it has a waiter or holds a permit.
// The pointer stays valid until Release or Remove drops its last permit or
// waiter.
type Flow[W any] struct {
	key    string
	weight int64
	held   int // permits held
	queued int // waiters, over every level
	// turn orders flows that hold equal shares: when the flow last got a
	// permit, or became active. The least recent goes first, so such
	// flows take turns (round robin) whatever their backlogs.
	turn uint64
	// shedAt is when a waiter of the flow was last shed (zero: never
	// while active), for Spared.
	shedAt time.Time
	// asked counts the flow's requests ranked in the table's window
	// window, askedPrev those of the window before, and since is the
	// table's count of requests when the flow became active (see
	// asksLess).
	asked, askedPrev int
	window           uint32
	since            uint64
	queues           *queue[W]
	next             *Flow[W] // free list
}

// Key returns the flow's key.
func (f *Flow[W]) Key() string { return f.key }

// Held returns the number of permits the flow holds.
func (f *Flow[W]) Held() int { return f.held }

// queue is one flow's waiters at one level, in arrival order.
type queue[W any] struct {
	flow       *Flow[W]
	level      *Level[W]
	head, tail *Node[W]
	n          int
	shareAt    int // index in level.byShare
	lenAt      int // index in level.byLen
	nextOfFlow *queue[W]
}

// Table holds the active flows of one limiter by key. The zero value is
// empty and ready to use.
type Table[W any] struct {
	flows     map[string]*Flow[W]
	freeFlows *Flow[W]
	nFree     int // flows in freeFlows
	peak      int // most flows active at once since flows was made
	freeQs    []*queue[W]
	freeLvls  []*Level[W]
	seq       uint64
	held      int // permits held, over every flow

	// The flows' demand is counted in windows of requests (see Spared):
	// asks counts every request, window numbers the current window and
	// windowAsked counts the requests in it; top and prevTop are the most
	// any flow asked per weight in it and in the one before (a count and
	// a weight; zero: none yet), prevLen the length of the one before.
	asks               uint64
	window             uint32
	windowAsked        int
	topN, topW         int64
	prevTopN, prevTopW int64
	prevLen            int64
}

// maxFree bounds each free list: enough to make a steady state allocate
// nothing, little enough that a burst of flows leaves little behind.
const maxFree = 64

// Active returns the number of active flows.
func (t *Table[W]) Active() int { return len(t.flows) }

// Held returns the number of permits held by flows.
func (t *Table[W]) Held() int { return t.held }

// MaxHeld returns the most permits any one flow holds. It looks at every
// active flow: it is for statistics, not for a request's path.
func (t *Table[W]) MaxHeld() int {
	m := 0
	for _, f := range t.flows {
		m = max(m, f.held)
	}
	return m
}

// Lookup returns the active flow with key, or nil.
func (t *Table[W]) Lookup(key string) *Flow[W] { return t.flows[key] }

// flow returns the active flow with key, making it active with weight if
// it is not.
func (t *Table[W]) flow(key string, weight int) *Flow[W] {
	if f := t.flows[key]; f != nil {
		return f
	}
	if t.flows == nil {
		t.flows = make(map[string]*Flow[W])
	}
	f := t.freeFlows
	if f != nil {
		t.freeFlows = f.next
		t.nFree--
		f.next = nil
	} else {
		f = new(Flow[W])
	}
	t.seq++
	f.key, f.weight, f.turn, f.window, f.since = key, clampWeight(weight), t.seq, t.window, t.asks
	t.flows[key] = f
	t.peak = max(t.peak, len(t.flows))
	return f
}

func clampWeight(w int) int64 {
	return int64(min(max(w, 1), MaxWeight))
}

// dropIfIdle forgets f once it neither waits nor holds a permit.
func (t *Table[W]) dropIfIdle(f *Flow[W]) {
	if f.held > 0 || f.queued > 0 {
		return
	}
	delete(t.flows, f.key)
	if len(t.flows) == 0 && t.peak > maxFree {
		// A map keeps its buckets after deletes: a table that held many
		// flows at once starts afresh once it is empty, so its memory
		// follows the flows active now, not the most ever seen.
		t.flows, t.peak = nil, 0
	}
	*f = Flow[W]{}
	if t.nFree < maxFree {
		f.next = t.freeFlows
		t.freeFlows = f
		t.nFree++
	}
}

// Hold records a permit taken by the flow key (weight as in Push) and
// returns the flow, which holds it until Release.
func (t *Table[W]) Hold(key string, weight int) *Flow[W] {
	f := t.flow(key, weight)
	t.ask(f)
	t.hold(f)
	return f
}

func (t *Table[W]) hold(f *Flow[W]) {
	f.held++
	t.held++
	t.seq++
	f.turn = t.seq
	for q := f.queues; q != nil; q = q.nextOfFlow {
		q.level.shareDown(q.shareAt) // more held, and a later turn: later
		q.level.lenUp(q.lenAt)       // uses more of the limiter
	}
}

// Shed records that a waiter of f is being shed at now (rejected,
// evicted or timed out); call it before removing the waiter.
func (t *Table[W]) Shed(f *Flow[W], now time.Time) { f.shedAt = now }

// ShedKey is Shed for a newcomer of flow key that was refused without
// queueing; a flow that is not active has no state to record it in.
func (t *Table[W]) ShedKey(key string, now time.Time) {
	if f := t.flows[key]; f != nil {
		t.ask(f)
		f.shedAt = now
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
	return (f.shedAt.IsZero() || now.Sub(f.shedAt) >= interval) && t.asksLess(f)
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

// Release returns a permit held by f, which may leave the table.
func (t *Table[W]) Release(f *Flow[W]) {
	if f.held <= 0 {
		panic("fair: release of a flow that holds no permit")
	}
	f.held--
	t.held--
	for q := f.queues; q != nil; q = q.nextOfFlow {
		q.level.shareUp(q.shareAt) // fewer held: sooner
		q.level.lenDown(q.lenAt)
	}
	t.dropIfIdle(f)
}

// NewLevel returns an empty level of t, for the waiters of one priority.
// Give it back with FreeLevel once it is empty.
func (t *Table[W]) NewLevel() *Level[W] {
	if n := len(t.freeLvls); n > 0 {
		l := t.freeLvls[n-1]
		t.freeLvls = t.freeLvls[:n-1]
		return l
	}
	return &Level[W]{t: t}
}

// FreeLevel recycles an empty level.
func (t *Table[W]) FreeLevel(l *Level[W]) {
	if len(l.byShare) != 0 {
		panic("fair: FreeLevel of a level with waiters")
	}
	if len(t.freeLvls) < maxFree {
		t.freeLvls = append(t.freeLvls, l)
	}
}

// Level is the waiters of one priority, grouped by flow.
type Level[W any] struct {
	t *Table[W]
	// byShare is a min-heap of the level's queues: fewest permits held per
	// weight first, then the least recent turn. byLen is a max-heap: most
	// waiters here and permits held per weight first. Both hold every
	// non-empty queue.
	byShare []*queue[W]
	byLen   []*queue[W]
	n       int
}

// Len returns the number of waiters at the level.
func (l *Level[W]) Len() int { return l.n }

// Flows returns the number of flows waiting at the level.
func (l *Level[W]) Flows() int { return len(l.byShare) }

// Push appends n behind the waiters of flow key at this level. weight is
// the flow's weight if the flow is not active yet; an active flow keeps
// the weight it became active with.
func (l *Level[W]) Push(n *Node[W], key string, weight int) {
	t := l.t
	f := t.flow(key, weight)
	t.ask(f)
	q := f.queueAt(l)
	if q == nil {
		q = t.newQueue()
		q.flow, q.level = f, l
		q.nextOfFlow, f.queues = f.queues, q
	}
	t.seq++
	n.q, n.seq, n.prev, n.next = q, t.seq, q.tail, nil
	if q.tail != nil {
		q.tail.next = n
	} else {
		q.head = n
	}
	q.tail = n
	q.n++
	f.queued++
	l.n++
	if q.n == 1 {
		q.shareAt = len(l.byShare)
		l.byShare = append(l.byShare, q)
		l.shareUp(q.shareAt)
		q.lenAt = len(l.byLen)
		l.byLen = append(l.byLen, q)
	}
	l.lenUp(q.lenAt)
}

func (f *Flow[W]) queueAt(l *Level[W]) *queue[W] {
	for q := f.queues; q != nil; q = q.nextOfFlow {
		if q.level == l {
			return q
		}
	}
	return nil
}

func (t *Table[W]) newQueue() *queue[W] {
	if n := len(t.freeQs); n > 0 {
		q := t.freeQs[n-1]
		t.freeQs = t.freeQs[:n-1]
		return q
	}
	return new(queue[W])
}

// Best returns the waiter to grant next: the head of the flow holding the
// fewest permits per weight (ties: the least recent turn), or nil.
func (l *Level[W]) Best() *Node[W] {
	if len(l.byShare) == 0 {
		return nil
	}
	return l.byShare[0].head
}

// BestNewest returns the newest waiter of the flow Best would pick, for
// adaptive LIFO, or nil.
func (l *Level[W]) BestNewest() *Node[W] {
	if len(l.byShare) == 0 {
		return nil
	}
	return l.byShare[0].tail
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

// Weight returns the weight of flow key: its own while it is active,
// otherwise w clamped as Push would.
func (t *Table[W]) Weight(key string, w int) int64 {
	if f := t.flows[key]; f != nil {
		return f.weight
	}
	return clampWeight(w)
}

// Weight returns the flow's weight.
func (f *Flow[W]) Weight() int64 { return f.weight }

// Remove unlinks n, which must be queued (a cancel, a timeout, an
// eviction). Its flow may leave the table.
func Remove[W any](n *Node[W]) {
	f, t := n.q.flow, n.q.level.t // unlink may recycle n's queue
	unlink(n)
	t.dropIfIdle(f)
}

// Grant unlinks n, which must be queued, and records the permit it is
// given: its flow holds it until Release. It returns the flow.
func Grant[W any](n *Node[W]) *Flow[W] {
	f := n.q.flow
	t := n.q.level.t
	unlink(n)
	t.hold(f)
	return f
}

// Queued reports whether n is in a queue.
func (n *Node[W]) Queued() bool { return n.q != nil }

// Flow returns the flow n waits in, or nil when it is not queued.
func (n *Node[W]) Flow() *Flow[W] {
	if n.q == nil {
		return nil
	}
	return n.q.flow
}

func unlink[W any](n *Node[W]) {
	q := n.q
	if q == nil {
		panic("fair: node not queued")
	}
	l, f := q.level, q.flow
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		q.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		q.tail = n.prev
	}
	n.q, n.prev, n.next = nil, nil, nil
	q.n--
	f.queued--
	l.n--
	if q.n == 0 {
		l.removeQueue(q)
		return
	}
	l.lenDown(q.lenAt)
}

// removeQueue takes the empty q out of both heaps and out of its flow's
// list, and recycles it.
func (l *Level[W]) removeQueue(q *queue[W]) {
	l.heapRemove(&l.byShare, q.shareAt, true)
	l.heapRemove(&l.byLen, q.lenAt, false)
	f := q.flow
	if f.queues == q {
		f.queues = q.nextOfFlow
	} else {
		for p := f.queues; p != nil; p = p.nextOfFlow {
			if p.nextOfFlow == q {
				p.nextOfFlow = q.nextOfFlow
				break
			}
		}
	}
	*q = queue[W]{}
	if t := l.t; len(t.freeQs) < maxFree {
		t.freeQs = append(t.freeQs, q)
	}
}

// shareLess orders byShare: fewer permits held per weight first, then the
// least recent turn.
func shareLess[W any](a, b *queue[W]) bool {
	x, y := int64(a.flow.held)*b.flow.weight, int64(b.flow.held)*a.flow.weight
	if x != y {
		return x < y
	}
	return a.flow.turn < b.flow.turn
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

func (l *Level[W]) swapShare(i, j int) {
	h := l.byShare
	h[i], h[j] = h[j], h[i]
	h[i].shareAt, h[j].shareAt = i, j
}

func (l *Level[W]) swapLen(i, j int) {
	h := l.byLen
	h[i], h[j] = h[j], h[i]
	h[i].lenAt, h[j].lenAt = i, j
}

func (l *Level[W]) shareUp(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !shareLess(l.byShare[i], l.byShare[p]) {
			return
		}
		l.swapShare(i, p)
		i = p
	}
}

func (l *Level[W]) shareDown(i int) {
	h := l.byShare
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && shareLess(h[c+1], h[c]) {
			c++
		}
		if !shareLess(h[c], h[i]) {
			return
		}
		l.swapShare(i, c)
		i = c
	}
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

// heapRemove removes the element at i of the heap h (share: byShare,
// otherwise byLen) and restores the heap's order.
func (l *Level[W]) heapRemove(h *[]*queue[W], i int, share bool) {
	last := len(*h) - 1
	if i != last {
		if share {
			l.swapShare(i, last)
		} else {
			l.swapLen(i, last)
		}
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	if i == last {
		return
	}
	if share {
		l.shareDown(i)
		l.shareUp(i)
	} else {
		l.lenDown(i)
		l.lenUp(i)
	}
}
