package queue

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A shrink evicts the worst waiters, the newest of the lowest priority
// first, each Dropped by its one eviction; the best stay queued.
func TestReconfigureEvictsWorstFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTestEngine(Options{Limit: 1, QueueLimit: 4})
		mustAcquire(t, e)
		best := startAcquire(e, 0)
		lowOld := startAcquire(e, 5)
		mid := startAcquire(e, 1)
		lowNew := startAcquire(e, 5)
		if n := e.Reconfigure(Settings{Limit: 1, QueueLimit: 2}); n != 2 {
			t.Fatalf("evicted %d, want 2", n)
		}
		synctest.Wait()
		for name, a := range map[string]*acquirer{"newest low": lowNew, "older low": lowOld} {
			if r, ok := a.result(); !ok || r != Dropped {
				t.Fatalf("%s: %v %v, want Dropped", name, r, ok)
			}
		}
		for name, a := range map[string]*acquirer{"best": best, "mid": mid} {
			if _, ok := a.result(); ok {
				t.Fatalf("%s left the queue", name)
			}
		}
		wantStats(t, e, 1, 1, 2)
		// A raise grants at once; the queue drains in priority order.
		e.Reconfigure(Settings{Limit: 2, QueueLimit: 2})
		synctest.Wait()
		if r, ok := best.result(); !ok || r != Admitted {
			t.Fatalf("best after the raise: %v %v", r, ok)
		}
		wantStats(t, e, 2, 2, 1)
		release(t, e)
		synctest.Wait()
		if r, ok := mid.result(); !ok || r != Admitted {
			t.Fatalf("mid: %v %v", r, ok)
		}
		release(t, e)
		release(t, e)
		wantStats(t, e, 2, 0, 0)
	})
}

// A fair queue sheds the excess from the flow that queues the most.
func TestReconfigureFairShedsLargestFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTestEngine(Options{Limit: 1, QueueLimit: 6, Fair: true})
		mustAcquire(t, e)
		type waiter struct {
			flow string
			done chan Result
		}
		var ws []waiter
		for _, f := range []string{"a", "a", "b", "a", "a"} {
			w := waiter{f, make(chan Result, 1)}
			ws = append(ws, w)
			go func() {
				_, r, fl := e.AcquireRanked(context.Background(), func(context.Context) Rank { return Rank{Flow: w.flow, Weight: 1} }, true)
				if r == Admitted {
					e.ReleaseFlow(fl)
				}
				w.done <- r
			}()
			synctest.Wait()
		}
		e.Reconfigure(Settings{Limit: 1, QueueLimit: 3})
		synctest.Wait()
		dropped := map[string]int{}
		for _, w := range ws {
			select {
			case r := <-w.done:
				if r != Dropped {
					t.Fatalf("%s: %v", w.flow, r)
				}
				dropped[w.flow]++
			default:
			}
		}
		if dropped["a"] != 2 || dropped["b"] != 0 {
			t.Fatalf("dropped %v, want two of a's", dropped)
		}
		release(t, e)
		synctest.Wait()
		wantStats(t, e, 1, 0, 0)
	})
}

// CoDel can be turned on, retuned and off live; a new queue timeout
// applies to the waiters that queue after it.
func TestReconfigureCoDelAndQueueTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTestEngine(Options{Limit: 1, QueueLimit: 2, QueueTimeout: time.Second})
		mustAcquire(t, e)
		old := startAcquire(e, 0)
		e.Reconfigure(Settings{Limit: 1, QueueLimit: 2, QueueTimeout: 3 * time.Second, CoDel: &CoDel{}})
		if e.codel == nil || e.codel.target != defaultCoDelTarget {
			t.Fatalf("CoDel not on: %+v", e.codel)
		}
		e.Reconfigure(Settings{Limit: 1, QueueLimit: 2, QueueTimeout: 3 * time.Second, CoDel: &CoDel{Target: time.Millisecond}})
		if e.codel == nil || e.codel.target != time.Millisecond {
			t.Fatalf("CoDel not retuned: %+v", e.codel)
		}
		e.Reconfigure(Settings{Limit: 1, QueueLimit: 2, QueueTimeout: 3 * time.Second})
		if e.codel != nil {
			t.Fatal("CoDel still on")
		}
		fresh := startAcquire(e, 0)
		start := time.Now()
		time.Sleep(time.Second)
		synctest.Wait()
		if r, ok := old.result(); !ok || r != QueueTimeout || time.Since(start) != time.Second {
			t.Fatalf("the old waiter: %v %v, want its own 1s timeout", r, ok)
		}
		if _, ok := fresh.result(); ok {
			t.Fatal("the new waiter timed out on the old timeout")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if r, ok := fresh.result(); !ok || r != QueueTimeout {
			t.Fatalf("the new waiter: %v %v, want the new 3s timeout", r, ok)
		}
		release(t, e)
	})
}
