package deadline

import (
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type firer struct {
	node  Node
	mu    sync.Mutex
	fired time.Time
}

func (f *firer) Fire() {
	f.mu.Lock()
	f.fired = time.Now()
	f.mu.Unlock()
}

func (f *firer) firedAt() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired
}

func newFirer() *firer {
	f := &firer{}
	f.node.Owner = f
	return f
}

// Every listed node fires at its own deadline, whatever the order of
// adding; removed nodes never fire; the list idles when nothing is due.
func TestListFiresEachNodeAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l List
		l.AllowFakeClock()
		start := time.Now()
		a, b, c, d := newFirer(), newFirer(), newFirer(), newFirer()
		mustAdd := func(f *firer, budget time.Duration) {
			if !l.Add(&f.node, time.Now(), budget) {
				t.Fatal("Add refused a node")
			}
		}
		mustAdd(a, 5*time.Second)
		time.Sleep(time.Second)
		mustAdd(b, 5*time.Second)
		mustAdd(c, 2*time.Second) // earlier than the tail: walks back, re-arms
		l.Remove(&b.node)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := a.firedAt().Sub(start); got != 5*time.Second {
			t.Errorf("a fired at %v", got)
		}
		if got := c.firedAt().Sub(start); got != 3*time.Second {
			t.Errorf("c fired at %v", got)
		}
		if !b.firedAt().IsZero() || !d.firedAt().IsZero() {
			t.Error("a removed or unlisted node fired")
		}
		if !l.Idle() || l.Len() != 0 {
			t.Error("list not idle")
		}
	})
}

// A node far earlier than the tail (more than maxWalk steps) is refused.
func TestListRefusesFarOutOfOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l List
		l.AllowFakeClock()
		now := time.Now()
		for i := 0; i < maxWalk+1; i++ {
			l.Add(&newFirer().node, now, time.Hour)
		}
		if l.Add(&newFirer().node, now, time.Second) {
			t.Fatal("a node needing more than maxWalk steps was accepted")
		}
		if l.Len() != maxWalk+1 {
			t.Fatalf("Len = %d", l.Len())
		}
	})
}

func BenchmarkListAddRemove(b *testing.B) {
	var l List
	f := newFirer()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		l.Add(&f.node, now, time.Hour)
		l.Remove(&f.node)
	}
	l.timer.Stop()
}

// By default a list refuses entries read on a synctest bubble's clock:
// a timer armed in a bubble dies with it.
func TestListRefusesFakeClockByDefault(t *testing.T) {
	var l List
	synctest.Test(t, func(t *testing.T) {
		if l.Add(&newFirer().node, time.Now(), time.Second) {
			t.Fatal("an entry on a bubble's clock was accepted")
		}
	})
	f := newFirer()
	if !l.Add(&f.node, time.Now(), time.Hour) {
		t.Fatal("an entry on the real clock was refused")
	}
	l.Remove(&f.node)
	l.timer.Stop()
}

type blockingFirer struct {
	node    Node
	release chan struct{}
}

func (b *blockingFirer) Fire() { <-b.release }

// An owner whose Fire blocks (a 504 written to a client that does not
// read) does not hold up the other deadlines.
func TestListSlowFireDoesNotStallOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l List
		l.AllowFakeClock()
		slow := &blockingFirer{release: make(chan struct{})}
		slow.node.Owner = slow
		l.Add(&slow.node, time.Now(), time.Second)
		f := newFirer()
		l.Add(&f.node, time.Now(), 2*time.Second)
		start := time.Now()
		time.Sleep(3 * time.Second)
		if got := f.firedAt().Sub(start); got != 2*time.Second {
			t.Errorf("second node fired at %v, want 2s", got)
		}
		close(slow.release)
	})
}

// A deadline too far to count from the list's epoch is never due: its
// sum saturates instead of wrapping into the past.
func TestListFarDeadlineNeverDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l List
		l.AllowFakeClock()
		first, far := newFirer(), newFirer()
		if !l.Add(&first.node, time.Now(), time.Second) {
			t.Fatal("Add refused a node")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !l.Add(&far.node, time.Now(), time.Duration(math.MaxInt64)) {
			t.Fatal("Add refused the far node")
		}
		near := newFirer() // the timer fires for it and walks the list
		if !l.Add(&near.node, time.Now(), time.Second) {
			t.Fatal("Add refused a node")
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if near.firedAt().IsZero() {
			t.Error("the near deadline did not fire")
		}
		if !far.firedAt().IsZero() {
			t.Error("a deadline past the clock's range fired")
		}
		l.Remove(&far.node)
		l.timer.Stop()
	})
}
