// Package deadline holds the timing machinery shared by the timeout
// strategy and the inbound middleware: a context whose deadline is driven
// from outside (Context), and one timer serving many deadlines (List).
package deadline

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Context is a context.Context with a deadline that its owner ends, from a
// timer of its own choosing, with End. It behaves like
// context.WithDeadlineCause: at the deadline Err is
// context.DeadlineExceeded, for it and for every context derived from it,
// and context.Cause reports the cause given to End. Unlike it, the owner
// can stop timing it (Untime), after which it no longer reports the
// deadline, and it costs only what is used: the done channel and the watch
// on the parent are set up on the first Done or AfterFunc call, so a
// callback that never waits on its context pays for neither. Children
// derived with the context package attach through the AfterFunc method
// (no goroutine per child).
//
// Its reported deadline is the one given to Init: the owner passes the
// earlier of its own and the parent's. After the owner ends it without a
// cause (the execution finished), context.Cause follows the parent's
// lookups, as Value does: if the parent is cancelled later with a cause,
// Cause reports it while Err stays Canceled.
//
// The zero value is not usable: call Init first. It is safe for concurrent
// use once initialized; it must not be copied after.
type Context struct {
	parent   context.Context
	deadline time.Time
	untimed  atomic.Bool
	owned    bool                      // set by Own before use: the parent's end reaches c only through End
	ended    atomic.Pointer[endState]  // set once, by End's compare-and-swap
	mu       sync.Mutex                // guards slow's fields
	slow     atomic.Pointer[slowState] // made under mu on the first Done or AfterFunc
}

// endState is how c ended.
type endState struct {
	err   error
	cause context.Context // cancelled with End's cause; nil without one
}

// The ends of nearly every request, shared: End without a cause
// allocates nothing for them.
var (
	endedCanceled = &endState{err: context.Canceled}
	endedDeadline = &endState{err: context.DeadlineExceeded}
)

// slowState is what only a context that is waited on needs; kept apart so
// that one that is not stays small.
type slowState struct {
	done       chan struct{}
	afters     *afterFunc  // the last registered; each links to the one before
	stopParent func() bool // the watch on parent, if any
	first      afterFunc   // the first AfterFunc's node: no allocation of its own
	firstUsed  bool        // never reused, as its stop still names it
	closed     bool        // done is closed, or being closed by End: nothing more registers
}

type afterFunc struct {
	f    func()
	prev *afterFunc
}

// Init sets the parent and the deadline, before the context is used (until
// then it may be called again).
func (c *Context) Init(parent context.Context, deadline time.Time) {
	c.parent = parent
	c.deadline = deadline
}

// Own makes the owner end c when the parent ends, instead of c following
// the parent by itself: until the owner calls End, c is not done even if
// the parent is. An owner that must act before the handler sees its
// context end (answer the deadline, under its lock) watches the parent
// and calls End. Call it after Init, before c is used.
func (c *Context) Own() { c.owned = true }

// Parent returns the parent given to Init.
func (c *Context) Parent() context.Context { return c.parent }

// At returns the deadline given to Init, even after Untime.
func (c *Context) At() time.Time { return c.deadline }

// Untime makes the context stop reporting its deadline (the owner will not
// end it for time any more).
func (c *Context) Untime() { c.untimed.Store(true) }

// Deadline implements context.Context.
func (c *Context) Deadline() (time.Time, bool) {
	if c.untimed.Load() || c.deadline.IsZero() {
		return c.parent.Deadline() // untimed, or timed only by the parent (Own)
	}
	return c.deadline, true
}

// Done implements context.Context.
func (c *Context) Done() <-chan struct{} {
	if s := c.slow.Load(); s != nil {
		return s.done // made once, never replaced
	}
	c.mu.Lock()
	d := c.watchLocked().done
	c.mu.Unlock()
	return d
}

// watchLocked makes the done channel and, while c is live, watches the
// parent so that c ends with it. c.mu must be held.
//
// End takes no lock until it finds slow set: slow is published before
// ended is read here, and End's compare-and-swap of ended comes before
// its read of slow, so one of the two sees the other. If this one sees
// the end, it closes done (End, if it saw slow too, finds it closed).
func (c *Context) watchLocked() *slowState {
	if s := c.slow.Load(); s != nil {
		return s
	}
	s := &slowState{done: make(chan struct{})}
	c.slow.Store(s)
	if c.ended.Load() != nil {
		s.closed = true
		close(s.done)
		return s
	}
	if c.owned || c.parent.Done() == nil {
		return s // the owner watches the parent, or it never ends
	}
	// The callback runs on its own goroutine (or the canceller's), never
	// under c.mu.
	s.stopParent = context.AfterFunc(c.parent, c.parentDone)
	return s
}

func (c *Context) parentDone() { c.End(c.parent.Err(), nil) }

// Err implements context.Context.
func (c *Context) Err() error {
	if e := c.ended.Load(); e != nil {
		return e.err
	}
	// Without a watch (nobody asked for Done) the parent is read here.
	if c.owned {
		return nil
	}
	if perr := c.parent.Err(); perr != nil {
		c.End(perr, nil)
		return c.Err()
	}
	return nil
}

// Value implements context.Context. After End with a cause, lookups go
// through a cancelled context that carries it, which is how context.Cause
// finds it.
func (c *Context) Value(key any) any {
	if e := c.ended.Load(); e != nil && e.cause != nil {
		return e.cause.Value(key)
	}
	return c.parent.Value(key)
}

func (c *Context) String() string { return "deadline.Context" }

// EndedWith reports whether c was ended by End with this cause.
func (c *Context) EndedWith(cause error) bool {
	e := c.ended.Load()
	return e != nil && e.cause != nil && context.Cause(e.cause) == cause
}

// AfterFunc arranges for f to run once c is done; the context package uses
// it to propagate cancellation to children. f runs on the goroutine that
// ends c, or in its own goroutine if c has already ended (the caller may
// hold a lock f needs).
func (c *Context) AfterFunc(f func()) (stop func() bool) {
	if c.Err() != nil {
		go f()
		return func() bool { return false }
	}
	c.mu.Lock()
	if c.ended.Load() != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	s := c.watchLocked()
	if s.closed {
		// End won between the check above and the watch.
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a := &s.first
	if s.firstUsed {
		a = new(afterFunc)
	}
	s.firstUsed = true
	a.f, a.prev = f, s.afters
	s.afters = a
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for p := &c.slow.Load().afters; *p != nil; p = &(*p).prev {
			if *p == a {
				*p = a.prev
				return true
			}
		}
		return false
	}
}

// End makes c done with err and, if cause is not nil, that cause (what
// context.Cause reports); only the first call counts, and it reports
// whether it was this one. If the parent has already ended, c ends with
// the parent's error and cause instead, and EndedWith reports false. End
// also drops the watch on the parent. The functions registered with
// AfterFunc (the cancellation of derived contexts among them) run on the
// calling goroutine before End returns, and before Done is closed, so
// whoever sees c done finds every context derived from it done too; a
// caller holding a lock must not register any that need it.
func (c *Context) End(err, cause error) bool {
	if c.ended.Load() != nil {
		return false
	}
	if perr := c.parent.Err(); perr != nil {
		// The parent ended first, even if nobody was watching it: as with
		// the context package, its error and cause win.
		err, cause = perr, nil
	}
	// A loser's state (an allocation only with a cause) is dropped.
	if !c.ended.CompareAndSwap(nil, newEndState(c.parent, err, cause)) {
		return false
	}
	s := c.slow.Load()
	if s == nil {
		// Nobody waits (the common request): no lock. A Done or
		// AfterFunc from now on finds c ended (watchLocked).
		return true
	}
	c.mu.Lock()
	if s.closed {
		c.mu.Unlock() // watchLocked saw the end and closed done
		return true
	}
	// This done closes once the derived contexts have ended.
	s.closed = true
	afters, stop := s.afters, s.stopParent
	s.afters, s.stopParent = nil, nil
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	runAfters(afters)
	close(s.done)
	return true
}

func newEndState(parent context.Context, err, cause error) *endState {
	if cause != nil {
		// context.Cause looks the cause up through Value; only a context
		// of the context package can carry it.
		cc, cancel := context.WithCancelCause(parent)
		cancel(cause)
		if context.Cause(cc) == cause {
			return &endState{err: err, cause: cc}
		}
		// The parent ended since End looked: it ended first after all,
		// and c takes its error with its cause, not ours with its cause.
		err = parent.Err()
	}
	switch err {
	case context.Canceled:
		return endedCanceled
	case context.DeadlineExceeded:
		return endedDeadline
	}
	return &endState{err: err}
}

// runAfters runs the functions registered with AfterFunc, in the order
// they were registered (the list links each to the one before).
func runAfters(a *afterFunc) {
	var first *afterFunc
	for a != nil {
		a.prev, first, a = first, a, a.prev // reversed: prev now links to the next
	}
	for ; first != nil; first = first.prev {
		first.f()
	}
}
