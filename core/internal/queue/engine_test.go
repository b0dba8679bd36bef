package queue

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// priorityKey carries a test caller's priority; rankByContext reads it.
type priorityKey struct{}

func withPriority(ctx context.Context, p int) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

func rankByContext(ctx context.Context) int {
	p, _ := ctx.Value(priorityKey{}).(int)
	return p
}

func newTestEngine(o Options) *Engine {
	e := new(Engine)
	e.Init(o)
	return e
}

// mustAcquire takes a permit that is free.
func mustAcquire(t testing.TB, e *Engine) {
	t.Helper()
	if _, r := e.Acquire(context.Background(), nil); r != Admitted {
		t.Fatalf("Acquire = %v, want Admitted", r)
	}
}

// release returns a permit, failing the test if none was held.
func release(t testing.TB, e *Engine) {
	t.Helper()
	if !e.Release() {
		t.Fatal("Release without a held permit")
	}
}

func wantStats(t testing.TB, e *Engine, limit, inFlight, queued int) {
	t.Helper()
	if l, f, q := e.Stats(); l != limit || f != inFlight || q != queued {
		t.Fatalf("Stats() = %d, %d, %d; want %d, %d, %d", l, f, q, limit, inFlight, queued)
	}
}

// acquirer runs Acquire on its own goroutine so a test can watch it queue.
type acquirer struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan Result
}

// startAcquire starts Acquire with the given priority and, inside a synctest
// bubble, waits until it has either returned or blocked in the queue.
func startAcquire(e *Engine, prio int) *acquirer {
	ctx, cancel := context.WithCancel(withPriority(context.Background(), prio))
	a := &acquirer{ctx: ctx, cancel: cancel, done: make(chan Result, 1)}
	go func() {
		_, r := e.Acquire(ctx, rankByContext)
		a.done <- r
	}()
	synctest.Wait()
	return a
}

// result returns Acquire's result and true, or false if it is still waiting.
func (a *acquirer) result() (Result, bool) {
	select {
	case r := <-a.done:
		a.done <- r // keep it for later calls
		return r, true
	default:
		return 0, false
	}
}

func (a *acquirer) wantWaiting(t testing.TB) {
	t.Helper()
	if r, ok := a.result(); ok {
		t.Fatalf("Acquire returned %v, want it still queued", r)
	}
}

func (a *acquirer) wantResult(t testing.TB, want Result) {
	t.Helper()
	r, ok := a.result()
	if !ok {
		t.Fatal("Acquire still waiting, want it to have returned")
	}
	if r != want {
		t.Fatalf("Acquire = %v, want %v", r, want)
	}
}

func (a *acquirer) wantGranted(t testing.TB) { t.Helper(); a.wantResult(t, Admitted) }

// The zero Engine has no permit and no queue: it rejects everything.
func TestEngineZeroValueRejects(t *testing.T) {
	var e Engine
	if _, r := e.Acquire(context.Background(), nil); r != Full {
		t.Fatalf("zero Engine Acquire = %v, want Full", r)
	}
	if e.TryAcquire() {
		t.Fatal("zero Engine TryAcquire took a permit")
	}
	if e.Release() {
		t.Fatal("zero Engine Release reported a held permit")
	}
}

// Invariant: a waiter whose context ends at the moment it is granted hands
// the permit on to the next waiter and reports the cancellation: it never
// both runs and passes the permit, and the permit is never lost.
func TestEngineCancelRacingGrantHandsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTestEngine(Options{Limit: 1, QueueLimit: 2})
		mustAcquire(t, e)
		a, b := startAcquire(e, 0), startAcquire(e, 0)
		// Cancel and grant in one critical section, so a wakes to find both
		// its context done and the permit already granted.
		e.Lock()
		a.cancel()
		e.ReleaseLocked()
		if e.queue.len() != 1 {
			t.Fatal("grant did not take the first waiter")
		}
		e.Unlock()
		synctest.Wait()
		a.wantResult(t, Cancelled)
		b.wantGranted(t) // the permit was handed on
		wantStats(t, e, 1, 1, 0)
		release(t, e)

		// With nobody left to hand on to, the permit is simply freed.
		c := startAcquire(e, 0)
		c.wantGranted(t)
		d := startAcquire(e, 0)
		e.Lock()
		d.cancel()
		e.ReleaseLocked()
		e.Unlock()
		synctest.Wait()
		d.wantResult(t, Cancelled)
		wantStats(t, e, 1, 0, 0)
		a.cancel()
		b.cancel()
		c.cancel()
	})
}

// A queued caller reports how long it waited, at least 1 ns once granted.
func TestEngineReportsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTestEngine(Options{Limit: 1, QueueLimit: 1})
		mustAcquire(t, e)
		got := make(chan time.Duration, 1)
		go func() {
			w, _ := e.Acquire(context.Background(), nil)
			got <- w
		}()
		synctest.Wait()
		time.Sleep(30 * time.Millisecond)
		release(t, e)
		if w := <-got; w != 30*time.Millisecond {
			t.Fatalf("waited %v, want 30ms", w)
		}
		release(t, e)
		wantStats(t, e, 1, 0, 0)
	})
}

// Invariant: a grant that lands as the queue timeout fires wins, and the
// caller holds exactly one permit.
func TestEngineGrantRacingQueueTimeoutWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTestEngine(Options{Limit: 1, QueueLimit: 1, QueueTimeout: time.Second})
		mustAcquire(t, e)
		a := startAcquire(e, 0)
		// Hold the lock across the timeout so the waiter's timer fires before
		// it can record the timeout; grant it in the same critical section.
		e.Lock()
		time.Sleep(time.Second)
		e.ReleaseLocked()
		e.Unlock()
		synctest.Wait()
		a.wantGranted(t)
		wantStats(t, e, 1, 1, 0)
		release(t, e)
		a.cancel()
	})
}
