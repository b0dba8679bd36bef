package deadline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"pgregory.net/rapid"
)

// A timed request in core/inbound is one allocation that embeds a
// Context; it must fit the 512-byte size class (a larger object takes a
// malloc header and a slower allocation path), which leaves the Context 72
// bytes.
func TestContextSize(t *testing.T) {
	var c Context
	if got := unsafe.Sizeof(c); got > 72 {
		t.Fatalf("deadline.Context is %d bytes, want at most 72", got)
	}
}

// A handler that never waits on its context pays nothing for it but the
// Context itself: ending it, reading Err, Value and EndedWith allocate
// nothing.
func TestContextEndAllocatesNothing(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, 7))
	defer cancel()
	at := time.Now().Add(time.Hour)
	c := new(Context)
	for name, f := range map[string]func(){
		"Init End": func() {
			*c = Context{}
			c.Init(parent, at)
			c.End(context.Canceled, nil)
		},
		"Init Err End Err": func() {
			*c = Context{}
			c.Init(parent, at)
			_ = c.Err()
			c.End(context.DeadlineExceeded, nil)
			_ = c.Err()
		},
		"Init End Value EndedWith": func() {
			*c = Context{}
			c.Init(parent, at)
			c.End(context.Canceled, nil)
			_ = c.Value(key{})
			_ = c.EndedWith(context.Canceled)
		},
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}
}

// What one racing goroutine does to the shared Context.
const (
	opDone = iota
	opErr
	opValue
	opCause
	opEnd
	opEndCause
	opAfterFunc
	opAfterFuncStop
	opChild
	opCancelParent
	nOps
)

type raceAfter struct {
	ran      atomic.Int32
	ranOnce  chan struct{}
	late     bool        // registered around the end: may run on its own goroutine, after Done closes
	stopping atomic.Bool // stop was called (its answer may not be in yet)
	stopped  atomic.Bool // stop returned true
}

type raceEnd struct {
	err, cause error
	won        bool
}

// Done, AfterFunc (and its stop), Err, Value, Cause, End, deriving
// children and the parent's end race on one Context. Exactly one End wins
// (unless the parent's end did); every function registered runs exactly
// once unless its stop returned true; whoever sees Done closed finds Err
// set and every child derived while the Context was live done; Done is one
// channel, closed once the goroutines are through; Err and Cause are the
// winner's, or the parent's if it ended first.
func TestContextConcurrentInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		type key struct{}
		parentCause := errors.New("client left")
		parent, cancelParent := context.WithCancelCause(context.WithValue(context.Background(), key{}, 7))
		defer cancelParent(nil)
		var c Context
		c.Init(parent, time.Now().Add(time.Hour))
		owned := rapid.Bool().Draw(rt, "owned")
		if owned {
			c.Own()
		}
		n := rapid.IntRange(2, 4).Draw(rt, "goroutines")
		plans := make([][]int, n)
		for g := range plans {
			plans[g] = rapid.SliceOfN(rapid.IntRange(0, nOps-1), 1, 8).Draw(rt, fmt.Sprint("plan", g))
		}
		// Someone always ends it: an owned context ends only through End.
		plans[0] = append(plans[0], opEnd)
		parentCancelled := false
		for _, p := range plans {
			for _, op := range p {
				parentCancelled = parentCancelled || op == opCancelParent
			}
		}

		var (
			mu       sync.Mutex
			failures []string
			ends     []*raceEnd
			afters   []*raceAfter
			live     []context.Context // derived while c was live
			children []context.Context
			cancels  []context.CancelFunc
			dones    []<-chan struct{}
		)
		fail := func(format string, args ...any) {
			mu.Lock()
			failures = append(failures, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		var observed sync.WaitGroup
		observed.Go(func() {
			<-c.Done()
			if c.Err() == nil {
				fail("Done closed, Err nil")
			}
			mu.Lock()
			defer mu.Unlock()
			for i, ch := range live {
				if ch.Err() == nil {
					failures = append(failures, fmt.Sprintf("Done closed, child %d live", i))
				}
			}
			for i, a := range afters {
				if a.ran.Load() == 0 && !a.stopping.Load() && !a.late {
					failures = append(failures, fmt.Sprintf("Done closed, AfterFunc %d not run", i))
				}
			}
		})

		var wg sync.WaitGroup
		for g, plan := range plans {
			wg.Go(func() {
				for i, op := range plan {
					switch op {
					case opDone:
						d := c.Done()
						mu.Lock()
						dones = append(dones, d)
						mu.Unlock()
					case opErr:
						_ = c.Err()
					case opValue:
						if v := c.Value(key{}); v != 7 {
							fail("Value = %v, want the parent's 7", v)
						}
					case opCause:
						_ = context.Cause(&c)
						_ = c.EndedWith(parentCause)
					case opEnd, opEndCause:
						e := &raceEnd{err: context.Canceled}
						if i%2 == 0 {
							e.err = context.DeadlineExceeded
						}
						if op == opEndCause {
							e.cause = fmt.Errorf("cause %d.%d", g, i)
						}
						e.won = c.End(e.err, e.cause)
						mu.Lock()
						ends = append(ends, e)
						mu.Unlock()
					case opAfterFunc, opAfterFuncStop:
						a := &raceAfter{ranOnce: make(chan struct{})}
						liveBefore := c.Err() == nil
						stop := c.AfterFunc(func() {
							if a.ran.Add(1) == 1 {
								close(a.ranOnce)
							}
						})
						mu.Lock()
						a.late = !liveBefore || c.Err() != nil
						afters = append(afters, a)
						mu.Unlock()
						if op == opAfterFuncStop {
							a.stopping.Store(true)
							a.stopped.Store(stop())
						}
					case opChild:
						ch, cancel := context.WithCancel(&c)
						isLive := c.Err() == nil
						mu.Lock()
						children = append(children, ch)
						cancels = append(cancels, cancel)
						if isLive {
							live = append(live, ch)
						}
						mu.Unlock()
					case opCancelParent:
						cancelParent(parentCause)
					}
				}
			})
		}
		wg.Wait()
		if !arrives(c.Done()) {
			rt.Fatal("Done open after End")
		}
		observed.Wait()
		for _, f := range failures {
			rt.Error(f)
		}
		defer func() {
			for _, cancel := range cancels {
				cancel()
			}
		}()

		done := c.Done()
		select {
		case <-done:
		default:
			rt.Fatal("Done open after End")
		}
		for i, d := range dones {
			if d != done {
				rt.Errorf("Done call %d returned another channel", i)
			}
		}
		for i, ch := range children {
			// Derived after the end: cancelled on its own goroutine.
			if !arrives(ch.Done()) {
				rt.Fatalf("child %d never done", i)
			}
			if !errors.Is(ch.Err(), c.Err()) {
				rt.Errorf("child %d: Err %v, want %v", i, ch.Err(), c.Err())
			}
		}
		for i, a := range afters {
			if a.stopped.Load() {
				if a.ran.Load() != 0 {
					rt.Errorf("AfterFunc %d ran after its stop returned true", i)
				}
				continue
			}
			if !arrives(a.ranOnce) {
				rt.Fatalf("AfterFunc %d never ran", i)
			}
			if got := a.ran.Load(); got != 1 {
				rt.Errorf("AfterFunc %d ran %d times", i, got)
			}
		}

		var w *raceEnd
		for _, e := range ends {
			if e.won {
				if w != nil {
					rt.Fatalf("two Ends won: %v and %v", w, e)
				}
				w = e
			}
		}
		watched := !owned && parentCancelled // the parent's end may end c
		if w == nil {
			if !watched {
				rt.Fatal("no End won")
			}
			if !errors.Is(c.Err(), context.Canceled) || context.Cause(&c) != parentCause {
				rt.Fatalf("ended by the parent: Err %v, Cause %v", c.Err(), context.Cause(&c))
			}
			return
		}
		err, cause := c.Err(), context.Cause(&c)
		switch {
		case w.cause != nil && c.EndedWith(w.cause):
			if err != w.err || cause != w.cause {
				rt.Fatalf("Err %v, Cause %v: want the winner's %v, %v", err, cause, w.err, w.cause)
			}
		case parentCancelled && err == context.Canceled && cause == parentCause:
			// The parent ended first, or c ended without a cause and
			// Cause follows the parent.
		case w.cause == nil && err == w.err && (cause == nil || cause == err) && !parentCancelled:
			// Without a cause, context.Cause finds the parent's cancelCtx
			// live, and reports nothing or (Go 1.24 on) Err.
		case w.cause == nil && err == w.err && cause == parentCause && parentCancelled:
		default:
			rt.Fatalf("Err %v, Cause %v; winner %v, %v; parent cancelled %v", err, cause, w.err, w.cause, parentCancelled)
		}
	})
}

// arrives reports whether ch is closed within a bound far above any
// scheduling delay: a missing close fails the test instead of hanging it.
func arrives[T any](ch <-chan T) bool {
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// End takes no lock when nobody waits on the Context, so it races the
// first Done or AfterFunc: whichever way the race goes, done is closed
// exactly once and a function registered runs exactly once.
func TestEndRacingFirstWait(t *testing.T) {
	n := 50000
	if testing.Short() {
		n = 2000
	}
	for i := range n {
		var c Context
		c.Init(context.Background(), time.Now().Add(time.Hour))
		ran := make(chan struct{})
		var runs atomic.Int32
		gate := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			<-gate
			if i%2 == 0 {
				c.AfterFunc(func() {
					if runs.Add(1) == 1 {
						close(ran)
					}
				})
			} else {
				_ = c.Done()
				runs.Add(1)
				close(ran)
			}
		})
		wg.Go(func() {
			<-gate
			c.End(context.Canceled, nil)
		})
		close(gate)
		wg.Wait()
		if !arrives(ran) || !arrives(c.Done()) {
			t.Fatalf("round %d: the function did not run or Done stayed open", i)
		}
		if got := runs.Load(); got != 1 {
			t.Fatalf("round %d: ran %d times", i, got)
		}
	}
}
