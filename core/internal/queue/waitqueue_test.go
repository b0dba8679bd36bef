package queue

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func newTestWaiter(p int) *waiter { return &waiter{priority: p} }

// drainQueue pops every waiter in grant order.
func drainQueue(q *waitQueue) []*waiter {
	var out []*waiter
	for w := q.popBest(); w != nil; w = q.popBest() {
		out = append(out, w)
	}
	return out
}

// Invariant: lower priority numbers are granted first, FIFO within one.
func TestWaitQueueOrderPriorityThenArrival(t *testing.T) {
	var q waitQueue
	prios := []int{2, 0, 1, 0, 2, -1, 1, 0}
	ws := make([]*waiter, len(prios))
	for i, p := range prios {
		ws[i] = newTestWaiter(p)
		q.push(ws[i])
	}
	if q.len() != len(prios) {
		t.Fatalf("len = %d, want %d", q.len(), len(prios))
	}
	want := []*waiter{ws[5], ws[1], ws[3], ws[7], ws[2], ws[6], ws[0], ws[4]}
	got := drainQueue(&q)
	if !slices.Equal(got, want) {
		t.Fatalf("grant order wrong")
	}
	if q.len() != 0 || q.best() != nil || q.oldestWaiter() != nil || q.newestOfLowest() != nil || len(q.lists) != 0 {
		t.Fatalf("queue not empty after draining: %+v", q)
	}
}

func TestWaitQueueOldestAndNewestOfLowest(t *testing.T) {
	var q waitQueue
	if q.oldestWaiter() != nil || q.newestOfLowest() != nil || q.popBest() != nil {
		t.Fatal("empty queue returned a waiter")
	}
	a, b, c, d := newTestWaiter(1), newTestWaiter(5), newTestWaiter(5), newTestWaiter(0)
	for _, w := range []*waiter{a, b, c, d} {
		q.push(w)
	}
	if q.oldestWaiter() != a {
		t.Error("oldest is not the first pushed")
	}
	if q.newestOfLowest() != c {
		t.Error("newestOfLowest is not the newest of priority 5")
	}
	q.remove(a)
	if q.oldestWaiter() != b {
		t.Error("oldest after removing it is not the next arrival")
	}
	q.remove(c)
	if q.newestOfLowest() != b {
		t.Error("newestOfLowest after removing the newest is not the older one")
	}
	q.remove(b)
	if q.newestOfLowest() != d || q.oldestWaiter() != d || q.best() != d {
		t.Error("single waiter is not oldest, newest-of-lowest and best")
	}
	q.remove(d)
	if q.len() != 0 {
		t.Error("not empty")
	}
}

// Invariant 6: the queue's memory follows its contents; removed waiters are
// unlinked so nothing keeps them alive.
func TestWaitQueueRemoveUnlinks(t *testing.T) {
	var q waitQueue
	ws := []*waiter{newTestWaiter(0), newTestWaiter(0), newTestWaiter(0)}
	for _, w := range ws {
		q.push(w)
	}
	q.remove(ws[1])
	if ws[1].prev != nil || ws[1].next != nil || ws[1].older != nil || ws[1].newer != nil {
		t.Error("removed waiter still linked")
	}
	if ws[0].next != ws[2] || ws[2].prev != ws[0] || ws[0].newer != ws[2] || ws[2].older != ws[0] {
		t.Error("neighbours not relinked")
	}
}

func TestWaitQueuePushPopAllocs(t *testing.T) {
	var q waitQueue
	ws := []*waiter{newTestWaiter(0), newTestWaiter(1), newTestWaiter(2)}
	for _, w := range ws { // warm up the index's capacity
		q.push(w)
	}
	drainQueue(&q)
	allocs := testing.AllocsPerRun(100, func() {
		for _, w := range ws {
			q.push(w)
		}
		q.remove(ws[1])
		for q.popBest() != nil {
		}
	})
	if allocs != 0 {
		t.Fatalf("push/remove/pop allocated %v times per run, want 0", allocs)
	}
}

// TestWaitQueueMatchesModel checks every operation against a plain slice kept
// in arrival order: grant order is (priority, arrival), oldest and
// newest-of-lowest agree, and arbitrary removal keeps the rest intact.
func TestWaitQueueMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var q waitQueue
		var model []*waiter // arrival order
		bestOf := func() *waiter {
			var b *waiter
			for _, w := range model {
				if b == nil || w.priority < b.priority {
					b = w
				}
			}
			return b
		}
		removeModel := func(w *waiter) {
			i := slices.Index(model, w)
			model = slices.Delete(model, i, i+1)
		}
		t.Repeat(map[string]func(*rapid.T){
			"push": func(t *rapid.T) {
				w := newTestWaiter(rapid.IntRange(-3, 3).Draw(t, "priority"))
				q.push(w)
				model = append(model, w)
			},
			"popBest": func(t *rapid.T) {
				want := bestOf()
				got := q.popBest()
				if got != want {
					t.Fatalf("popBest = %p, want %p", got, want)
				}
				if want != nil {
					removeModel(want)
				}
			},
			"removeAny": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				w := model[rapid.IntRange(0, len(model)-1).Draw(t, "index")]
				q.remove(w)
				removeModel(w)
			},
			"": func(t *rapid.T) {
				if q.len() != len(model) {
					t.Fatalf("len = %d, model %d", q.len(), len(model))
				}
				if q.best() != bestOf() {
					t.Fatal("best differs from model")
				}
				var oldest, newestLow *waiter
				if len(model) > 0 {
					oldest = model[0]
				}
				for _, w := range model {
					if newestLow == nil || w.priority >= newestLow.priority {
						newestLow = w
					}
				}
				if q.oldestWaiter() != oldest {
					t.Fatal("oldest differs from model")
				}
				if q.newestOfLowest() != newestLow {
					t.Fatal("newestOfLowest differs from model")
				}
				if !slices.IsSortedFunc(q.lists, func(a, b priorityList) int { return a.priority - b.priority }) {
					t.Fatal("priority index not sorted")
				}
				for _, l := range q.lists {
					if l.head == nil {
						t.Fatal("empty priority list kept in the index")
					}
				}
			},
		})
	})
}

func BenchmarkWaitQueuePushPop(b *testing.B) {
	var q waitQueue
	ws := make([]*waiter, 64)
	for i := range ws {
		ws[i] = newTestWaiter(i % 4)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, w := range ws {
			q.push(w)
		}
		for q.popBest() != nil {
		}
	}
}
