package inbound

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// deadlineCtx is the handler's context under the middleware's timeout. At
// the deadline its Err is context.DeadlineExceeded, as the context contract
// asks, for it and for every context derived from it, so code that sorts
// errors (retries, an adaptive limiter, a gRPC client) sees a deadline, not
// a cancellation. It is not a context.WithDeadline because a hijacked
// connection must stop being timed and a timer context cannot be disarmed:
// here the middleware owns the timer, stops it on Hijack, and the reported
// deadline goes away with it.
//
// It costs only what is used: the done channel and the watch on the
// request's context (for a client that leaves) are set up on the first
// Done or AfterFunc call, so a handler that never waits on its context pays
// for neither. Children derived with the context package attach through
// the AfterFunc method (no goroutine per child). context.Cause of it is its
// Err, or the request's own cause when the client left.
type deadlineCtx struct {
	parent   context.Context
	deadline time.Time
	untimed  atomic.Bool

	mu         sync.Mutex
	done       chan struct{} // made on first use
	err        error
	afters     []*afterFunc
	stopParent func() bool // the watch on parent, once done exists
}

type afterFunc struct{ f func() }

func (c *deadlineCtx) init(parent context.Context, deadline time.Time) {
	c.parent = parent
	c.deadline = deadline
}

func (c *deadlineCtx) Deadline() (time.Time, bool) {
	if c.untimed.Load() {
		return c.parent.Deadline()
	}
	return c.deadline, true
}

func (c *deadlineCtx) Done() <-chan struct{} {
	c.mu.Lock()
	c.watchLocked()
	d := c.done
	c.mu.Unlock()
	return d
}

// watchLocked makes the done channel and, while c is live, watches the
// parent so that a client that leaves ends c too. c.mu must be held.
func (c *deadlineCtx) watchLocked() {
	if c.done != nil {
		return
	}
	c.done = make(chan struct{})
	if c.err != nil {
		close(c.done)
		return
	}
	// The callback runs on its own goroutine (or the canceller's), never
	// under c.mu.
	c.stopParent = context.AfterFunc(c.parent, c.parentDone)
}

func (c *deadlineCtx) parentDone() { c.end(c.parent.Err()) }

func (c *deadlineCtx) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	// Without a watch (nobody asked for Done) the parent is read here.
	if perr := c.parent.Err(); perr != nil {
		c.end(perr)
		return c.Err()
	}
	return nil
}

func (c *deadlineCtx) Value(key any) any { return c.parent.Value(key) }

func (c *deadlineCtx) String() string { return "inbound.deadlineCtx" }

// AfterFunc arranges for f to run once c is done; the context package uses
// it to propagate cancellation to children. f runs on the goroutine that
// ends c, or in its own goroutine if c has already ended (the caller may
// hold a lock f needs).
func (c *deadlineCtx) AfterFunc(f func()) (stop func() bool) {
	if c.Err() != nil {
		go f()
		return func() bool { return false }
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.watchLocked()
	a := &afterFunc{f: f}
	c.afters = append(c.afters, a)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.afters {
			if x == a {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

// end makes c done with err; only the first call counts. It also drops the
// watch on the parent.
func (c *deadlineCtx) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	stop := c.stopParent
	c.stopParent = nil
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	for _, a := range afters {
		a.f()
	}
}

// timedRequest is the state of one timed request: its writer, context and
// timer, in one allocation. It is not pooled, because a timer that fired
// as the handler returned may still run its callback afterwards; that
// callback then finds the writer done and leaves.
type timedRequest struct {
	m      *Middleware
	tw     timeoutWriter
	dctx   deadlineCtx
	ctx    context.Context // the handler's
	client context.Context // the request's own: ended means the client left
	timed  bool            // under the middleware's timeout (listed, or with its own timer)
	timer  *time.Timer     // its own timer, when the deadline list could not take it
	budget time.Duration   // from the start to the deadline (ours, or an earlier upstream one)
	stop   func() bool     // context.AfterFunc registration (custom pipeline)

	// On the middleware's deadline list (guarded by its lock).
	prev, next *timedRequest
	listed     bool
}

// isTimeout reports whether a context ended because time ran out (ours, a
// custom pipeline's timeout strategy, or an upstream deadline).
func isTimeout(cause error) bool {
	return errors.Is(cause, resilience.ErrTimeoutRejected) || errors.Is(cause, context.DeadlineExceeded)
}

// clientGone reports whether the request's own context ended for a reason
// other than time: the client disconnected or the server is shutting down.
// Then nothing is written.
func (t *timedRequest) clientGone() bool {
	return t.client.Err() != nil && !isTimeout(context.Cause(t.client))
}

// serveTimed runs next with the timed writer. With the middleware's own
// timeout it arms a timer; under a custom pipeline (custom) without one,
// it watches ctx for a pipeline timeout instead. A non-nil res receives
// how the request ended (for the adaptive limiter), even if it panicked.
func (m *Middleware) serveTimed(w http.ResponseWriter, r *http.Request, ctx context.Context, next http.Handler, custom bool, res *timedResult) {
	t := &timedRequest{m: m, client: r.Context()}
	t.tw.w = w
	t.tw.owner = t
	t.tw.h1 = r.ProtoMajor < 2
	t.ctx = ctx
	if m.timeout > 0 {
		now := time.Now()
		dl := now.Add(m.timeout)
		if pd, ok := ctx.Deadline(); ok && pd.Before(dl) {
			dl = pd // a budget from upstream ends first
		}
		t.dctx.init(ctx, dl)
		t.ctx = &t.dctx
		// Every field fire reads is set: it may run at once.
		t.budget = dl.Sub(now)
		t.timed = true
		if !m.deadlines.add(t, now) {
			t.timer = time.AfterFunc(t.budget, t.fire)
		}
	} else if custom && ctx.Done() != nil {
		t.stop = context.AfterFunc(ctx, t.ctxDone)
	}
	completed := false
	defer func() { t.finish(completed, res) }()
	next.ServeHTTP(&t.tw, r.WithContext(t.ctx))
	completed = true
}

// fire is the middleware's deadline, on the timer's goroutine.
func (t *timedRequest) fire() {
	tw := &t.tw
	tw.mu.Lock()
	if (tw.state != stateOpen && tw.state != stateCommitted) || t.clientGone() {
		tw.mu.Unlock()
		return
	}
	// Cancel first, so a handler that watches its context stops while the
	// 504 is being written; it cannot write meanwhile (the lock is held).
	t.dctx.end(context.DeadlineExceeded)
	late := t.expireLocked()
	tw.mu.Unlock()
	if late {
		t.m.timeoutTel.Emit(t.ctx, resilience.Event{Name: resilience.EventTimeout, Duration: t.budget, Err: t.m.timeoutErr})
	}
}

// ctxDone runs when a custom pipeline's context ends: a timeout there is
// answered like the middleware's own; a client that left gets nothing.
func (t *timedRequest) ctxDone() {
	if !isTimeout(context.Cause(t.ctx)) || t.clientGone() {
		return
	}
	t.tw.mu.Lock()
	t.expireLocked()
	t.tw.mu.Unlock()
}

// expireLocked answers the deadline and counts the handler as late.
func (t *timedRequest) expireLocked() bool {
	if s := t.tw.state; s != stateOpen && s != stateCommitted {
		return false
	}
	// Counted before the 504 goes out, so whoever sees the 504 sees it.
	t.tw.late = true
	t.m.late.Add(1)
	t.m.lateTotal.Add(1)
	t.tw.expireLocked()
	return true
}

// stopTimer takes t off the deadline list, or stops its own timer. If the
// deadline is being answered at this moment, fire finds the writer's state
// and acts on it.
func (t *timedRequest) stopTimer() {
	if t.timer != nil {
		t.timer.Stop()
		return
	}
	t.m.deadlines.remove(t)
}

// untime stops timing a hijacked request. Called with tw.mu held.
func (t *timedRequest) untime() {
	if t.timed {
		t.stopTimer() // if it already fired, fire finds the state hijacked
		t.dctx.untimed.Store(true)
	}
	if t.stop != nil {
		t.stop()
	}
}

// finish runs when the handler returns or panics (completed false), on
// the request's goroutine, before ServeHTTP returns.
func (t *timedRequest) finish(completed bool, res *timedResult) {
	if t.timed {
		t.stopTimer()
	}
	if t.stop != nil {
		t.stop()
	}
	// The handler may have returned because its context ended before any
	// callback answered (an upstream deadline, or a pipeline timeout whose
	// callback has not run yet): then the 504 is sent here.
	expired := completed && t.ctx.Err() != nil && isTimeout(context.Cause(t.ctx)) && !t.clientGone()
	tw := &t.tw
	tw.mu.Lock()
	before := tw.finishLocked(completed, expired)
	if res != nil {
		*res = timedResult{completed: completed, state: before, status: int(tw.status), clientGone: t.clientGone()}
	}
	if tw.late {
		tw.late = false
		t.m.late.Add(-1)
	}
	tw.mu.Unlock()
	if t.timed {
		t.dctx.end(context.Canceled)
	}
	if completed && before == stateAborted {
		// The response was committed and cut at the deadline: make
		// net/http drop the connection rather than end the response as if
		// it were whole. A panic in the handler propagates as itself.
		panic(http.ErrAbortHandler)
	}
}
