package inbound

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The handler's deadline context follows the context contract: Err is
// DeadlineExceeded at the deadline, the parent's error when the client
// leaves, and children derived with the context package follow it.
func TestDeadlineCtxContract(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		var c deadlineCtx
		c.init(context.Background(), time.Now().Add(time.Hour))
		child, cancel := context.WithCancel(&c)
		defer cancel()
		ran := make(chan struct{})
		context.AfterFunc(&c, func() { close(ran) })
		if c.Err() != nil || child.Err() != nil {
			t.Fatal("done before end")
		}
		c.end(context.DeadlineExceeded)
		c.end(context.Canceled) // only the first end counts
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
		var c deadlineCtx
		c.init(context.Background(), time.Now())
		called := false
		stop := c.AfterFunc(func() { called = true })
		if !stop() || stop() {
			t.Fatal("stop should report true once")
		}
		c.end(context.Canceled)
		if called {
			t.Fatal("stopped func ran")
		}
	})
	t.Run("untimed", func(t *testing.T) {
		var c deadlineCtx
		c.init(context.Background(), time.Now())
		if _, ok := c.Deadline(); !ok {
			t.Fatal("no deadline while timed")
		}
		c.untimed.Store(true)
		if _, ok := c.Deadline(); ok {
			t.Fatal("deadline reported after untiming")
		}
	})
	t.Run("client leaves", func(t *testing.T) {
		for _, watched := range []bool{false, true} {
			parent, cancel := context.WithCancel(context.Background())
			var c deadlineCtx
			c.init(parent, time.Now().Add(time.Hour))
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
		var c deadlineCtx
		c.init(context.WithValue(context.Background(), k{}, 7), time.Now())
		if c.Value(k{}) != 7 {
			t.Fatal("parent value lost")
		}
	})
}
