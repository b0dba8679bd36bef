// Ranking: a Level holds the waiters of one priority, grouped by flow,
// in two heaps over the same queues. byShare (a min-heap, this file)
// gives the next permit: the flow holding fewest permits per weight,
// then the least recent turn, its oldest waiter.
//
//	Level ─ byShare: min (held/weight, last turn) ─▶ Best, BestNewest, Grant
//	      └ byLen:   max (waiting+held)/weight   ─▶ Largest (evict.go)

package fair

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

// Remove unlinks n, which must be queued (a cancel, a timeout, an
// eviction). Its flow may leave the table.
func Remove[W any](n *Node[W]) {
	f, t := n.q.flow, n.q.level.t // unlink may recycle n's queue
	unlink(n)
	t.dropIfIdle(f)
}

// Grant unlinks n, which must be queued, and records the permit it is
// given: its flow holds it until Release. It returns the flow.
func Grant[W any](n *Node[W]) *Flow[W] { return GrantN(n, 1) }

// GrantN is Grant for a waiter given cost permits (cost >= 1): its flow
// holds all of them until ReleaseN.
func GrantN[W any](n *Node[W], cost int) *Flow[W] {
	f := n.q.flow
	t := n.q.level.t
	unlink(n)
	t.hold(f, cost)
	return f
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

func (l *Level[W]) swapShare(i, j int) {
	h := l.byShare
	h[i], h[j] = h[j], h[i]
	h[i].shareAt, h[j].shareAt = i, j
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
