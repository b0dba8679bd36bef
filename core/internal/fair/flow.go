// Flows: a Table holds the active flows of one limiter by key, each
// with the permits it holds, its waiters at each priority (one queue per
// Level) and its weight. A flow is created by its first waiter or permit
// and dropped with its last:
//
//	Push or Hold ──▶ active (waiting or holding) ──last Remove/Grant and Release──▶ gone
//
//	Table ─ flows[key] ─▶ Flow ─ queues ─▶ queue@Level ─ head … tail ─▶ Node
//	                       held, weight              (waiters in arrival order)

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
	// while active), for Spared; overAt when one was last shed while the
	// flow used more than its share, for WithinShare.
	shedAt, overAt time.Time
	// asked counts the flow's requests ranked in the table's window
	// window, askedPrev those of the window before, and since is the
	// table's count of requests when the flow became active (see
	// asksLess).
	asked, askedPrev int
	window           uint32
	since            uint64
	// pass and kept count the flow's waiters kept so far in the table's
	// current pass (see WithinShare).
	pass   uint64
	kept   int
	queues *queue[W]
	next   *Flow[W] // free list
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
	held      int   // permits held, over every flow
	weights   int64 // the weights of the active flows, summed
	pass      uint64

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
	t.weights += f.weight
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
	t.weights -= f.weight
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
func (t *Table[W]) Hold(key string, weight int) *Flow[W] { return t.HoldN(key, weight, 1) }

// HoldN is Hold for a request that costs n permits (n >= 1): the flow is
// charged all n, so a flow running costly requests holds more and waits
// behind flows that hold less.
func (t *Table[W]) HoldN(key string, weight, n int) *Flow[W] {
	f := t.flow(key, weight)
	t.ask(f)
	t.hold(f, n)
	return f
}

func (t *Table[W]) hold(f *Flow[W], n int) {
	f.held += n
	t.held += n
	t.seq++
	f.turn = t.seq
	for q := f.queues; q != nil; q = q.nextOfFlow {
		q.level.shareDown(q.shareAt) // more held, and a later turn: later
		q.level.lenUp(q.lenAt)       // uses more of the limiter
	}
}

// Release returns a permit held by f, which may leave the table.
func (t *Table[W]) Release(f *Flow[W]) { t.ReleaseN(f, 1) }

// ReleaseN returns n permits held by f (what HoldN or GrantN charged it),
// which may leave the table.
func (t *Table[W]) ReleaseN(f *Flow[W], n int) {
	if f.held < n || n <= 0 {
		panic("fair: release of permits a flow does not hold")
	}
	f.held -= n
	t.held -= n
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

func (t *Table[W]) newQueue() *queue[W] {
	if n := len(t.freeQs); n > 0 {
		q := t.freeQs[n-1]
		t.freeQs = t.freeQs[:n-1]
		return q
	}
	return new(queue[W])
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

// Queued reports whether n is in a queue.
func (n *Node[W]) Queued() bool { return n.q != nil }

// Flow returns the flow n waits in, or nil when it is not queued.
func (n *Node[W]) Flow() *Flow[W] {
	if n.q == nil {
		return nil
	}
	return n.q.flow
}
