package deadline

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// Context follows the context contract: Err is
// DeadlineExceeded at the deadline, the parent's error when the client
// leaves, and children derived with the context package follow it.
func TestDeadlineCtxContract(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		var c Context
		c.Init(context.Background(), time.Now().Add(time.Hour))
		child, cancel := context.WithCancel(&c)
		defer cancel()
		ran := make(chan struct{})
		context.AfterFunc(&c, func() { close(ran) })
		if c.Err() != nil || child.Err() != nil {
			t.Fatal("done before end")
		}
		c.End(context.DeadlineExceeded, nil)
		c.End(context.Canceled, nil) // only the first end counts
		<-ran
		<-child.Done()
		if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v, child Err = %v", c.Err(), child.Err())
		}
		if !errors.Is(context.Cause(child), context.DeadlineExceeded) {
			t.Fatalf("child cause = %v", context.Cause(child))
		}
		// Registered after the end: still runs.
		late := make(chan struct{})
		c.AfterFunc(func() { close(late) })
		<-late
	})
	t.Run("stop", func(t *testing.T) {
		var c Context
		c.Init(context.Background(), time.Now())
		called := false
		stop := c.AfterFunc(func() { called = true })
		if !stop() || stop() {
			t.Fatal("stop should report true once")
		}
		c.End(context.Canceled, nil)
		if called {
			t.Fatal("stopped func ran")
		}
	})
	t.Run("untimed", func(t *testing.T) {
		var c Context
		c.Init(context.Background(), time.Now())
		if _, ok := c.Deadline(); !ok {
			t.Fatal("no deadline while timed")
		}
		c.Untime()
		if _, ok := c.Deadline(); ok {
			t.Fatal("deadline reported after untiming")
		}
	})
	t.Run("client leaves", func(t *testing.T) {
		for _, watched := range []bool{false, true} {
			parent, cancel := context.WithCancel(context.Background())
			var c Context
			c.Init(parent, time.Now().Add(time.Hour))
			var done <-chan struct{}
			if watched {
				done = c.Done()
			}
			cancel()
			if watched {
				<-done // closed by the watch on the parent
			}
			// Unwatched, Err reads the parent: the contract holds either way.
			if !errors.Is(c.Err(), context.Canceled) {
				t.Fatalf("watched=%v: Err = %v", watched, c.Err())
			}
			<-c.Done()
		}
	})
	t.Run("values", func(t *testing.T) {
		type k struct{}
		var c Context
		c.Init(context.WithValue(context.Background(), k{}, 7), time.Now())
		if c.Value(k{}) != 7 {
			t.Fatal("parent value lost")
		}
	})
}

// With a cause, End makes context.Cause report it, for the context and for
// children derived before and after; the first End wins.
func TestContextCause(t *testing.T) {
	cause := errors.New("our timeout")
	var c Context
	c.Init(context.Background(), time.Now().Add(time.Hour))
	before, cancel := context.WithCancel(&c)
	defer cancel()
	if !c.End(context.DeadlineExceeded, cause) || c.End(context.Canceled, nil) {
		t.Fatal("End should report true once")
	}
	<-before.Done()
	after, cancel2 := context.WithCancel(&c)
	defer cancel2()
	for name, ctx := range map[string]context.Context{"ctx": &c, "child before": before, "child after": after} {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || context.Cause(ctx) != cause {
			t.Errorf("%s: Err %v, Cause %v", name, ctx.Err(), context.Cause(ctx))
		}
	}
	if !c.EndedWith(cause) || c.EndedWith(errors.New("other")) {
		t.Error("EndedWith")
	}
}

// A parent that ended first wins, even if nobody watched it: End then
// reports false and the context carries the parent's error and cause.
func TestContextParentEndedFirstWins(t *testing.T) {
	parentCause := errors.New("client left")
	parent, cancel := context.WithCancelCause(context.Background())
	var c Context
	c.Init(parent, time.Now().Add(time.Hour))
	cancel(parentCause)
	if c.End(context.DeadlineExceeded, errors.New("ours")) {
		// End still ends c, but with the parent's error.
		if !errors.Is(c.Err(), context.Canceled) || context.Cause(&c) != parentCause {
			t.Fatalf("Err %v, Cause %v", c.Err(), context.Cause(&c))
		}
	}
	if c.EndedWith(errors.New("ours")) {
		t.Fatal("EndedWith reports our cause")
	}
	if !errors.Is(c.Err(), context.Canceled) || context.Cause(&c) != parentCause {
		t.Fatalf("Err %v, Cause %v", c.Err(), context.Cause(&c))
	}
}

// Invariant: once a Context's Done is closed, every context derived from
// it is done too, so whoever wakes on the end (an adapter answering the
// deadline) and then looks at the handler's context (a child of it) finds
// it ended. The children's cancellation runs before Done closes: here an
// AfterFunc registered first holds End inside its callbacks, and Done must
// not be closed while a child registered after it is still live.
func TestDoneClosesAfterChildrenEnded(t *testing.T) {
	var c Context
	c.Init(context.Background(), time.Now().Add(time.Hour))
	done := c.Done()
	inAfters, release := make(chan struct{}), make(chan struct{})
	c.AfterFunc(func() {
		close(inAfters)
		<-release
	})
	child, cancel := context.WithCancel(&c)
	defer cancel()
	ended := make(chan struct{})
	go func() {
		c.End(context.DeadlineExceeded, nil)
		close(ended)
	}()
	<-inAfters
	select {
	case <-done:
		if child.Err() == nil {
			t.Error("Done is closed while a child derived from the context is still live")
		}
	default:
	}
	close(release)
	<-ended
	<-done
	if child.Err() == nil {
		t.Error("the child is live after End returned")
	}
}

// TestAfterFuncsRunInOrderAndStop: End runs the registered functions in
// the order they were registered, and a stopped one (first, middle or
// last) never runs while the others still do.
func TestAfterFuncsRunInOrderAndStop(t *testing.T) {
	for _, stopped := range []int{-1, 0, 2, 4} {
		var c Context
		c.Init(context.Background(), time.Now().Add(time.Hour))
		var got []int
		stops := make([]func() bool, 5)
		for i := range stops {
			stops[i] = c.AfterFunc(func() { got = append(got, i) })
		}
		var want []int
		for i := range stops {
			if i != stopped {
				want = append(want, i)
			}
		}
		if stopped >= 0 {
			if !stops[stopped]() {
				t.Fatalf("stop %d: false, want true", stopped)
			}
			if stops[stopped]() {
				t.Fatalf("stop %d twice: true", stopped)
			}
		}
		c.End(context.Canceled, nil)
		if !slices.Equal(got, want) {
			t.Errorf("stopped %d: ran %v, want %v", stopped, got, want)
		}
	}
}

// An owned context ends only through its owner's End, even after its
// parent has ended: the owner acts first (answers the deadline), then
// whoever waits on the context sees it end, with the parent's error and
// cause. Without a deadline of its own it reports the parent's.
func TestOwnedContextEndsOnlyThroughEnd(t *testing.T) {
	why := errors.New("the pipeline's timeout")
	at := time.Now().Add(time.Hour)
	base, cancel := context.WithCancelCause(context.Background())
	parent, stopParent := context.WithDeadline(base, at)
	defer stopParent()
	var c Context
	c.Init(parent, time.Time{})
	c.Own()
	if dl, ok := c.Deadline(); !ok || !dl.Equal(at) {
		t.Fatalf("Deadline = %v, %v: want the parent's %v", dl, ok, at)
	}
	done := c.Done()
	child, stop := context.WithCancel(&c)
	defer stop()
	cancel(why)
	<-parent.Done()
	if c.Err() != nil || child.Err() != nil {
		t.Fatalf("Err = %v, child Err = %v before End: the parent ended it", c.Err(), child.Err())
	}
	select {
	case <-done:
		t.Fatal("Done closed before End")
	default:
	}
	c.End(parent.Err(), nil)
	<-done
	<-child.Done()
	if !errors.Is(c.Err(), context.Canceled) || context.Cause(&c) != why || context.Cause(child) != why {
		t.Fatalf("Err = %v, Cause = %v, child's = %v: want the parent's", c.Err(), context.Cause(&c), context.Cause(child))
	}
}
