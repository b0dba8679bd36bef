package inbound

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/internal/deadline"
)

// timedRequest is the state of one timed request: its writer, context and
// timer, in one allocation. It is not pooled, because a timer that fired
// as the handler returned may still run its callback afterwards; that
// callback then finds the writer done and leaves.
type timedRequest struct {
	m      *Middleware
	tw     timeoutWriter
	dctx   deadline.Context // the handler's context under the timeout
	ctx    context.Context  // the handler's
	client context.Context  // the request's own: ended means the client left
	timed  bool             // under the middleware's timeout (listed, or with its own timer)
	own    bool             // the deadline is the middleware's timeout, not an earlier one of ctx
	timer  *time.Timer      // its own timer, when the deadline list could not take it
	budget time.Duration    // from the start to the deadline (ours, or an earlier upstream one)
	stop   func() bool      // context.AfterFunc registration (custom pipeline)
	node   deadline.Node    // on the middleware's deadline list

	detached *detachedWriter // HTTP/2: told when the 504 is out; nil otherwise
}

// isTimeout reports whether a context ended because time ran out (ours, a
// custom pipeline's timeout strategy, or an upstream deadline).
func isTimeout(cause error) bool {
	return errors.Is(cause, resilience.ErrTimeoutRejected) || errors.Is(cause, context.DeadlineExceeded)
}

// clientGone reports whether the request's own context ended for a reason
// other than time: the client disconnected or the server is shutting down.
// Then no 504 is written (finish decides between an abort and a 503).
func (t *timedRequest) clientGone() bool {
	return t.client.Err() != nil && !isTimeout(context.Cause(t.client))
}

// serveTimed runs c's handler with the timed writer and ctx. With the
// middleware's own timeout it arms a timer; under a custom pipeline
// (custom) without one, it watches ctx for a pipeline timeout instead. A
// non-nil res receives how the request ended (for the adaptive limiter),
// even if it panicked.
func (m *Middleware) serveTimed(ctx context.Context, c *call, custom bool, res *result) {
	r := c.r
	t := &timedRequest{m: m, client: r.Context()}
	t.tw.w = c.w
	t.tw.owner = t
	t.tw.h1 = r.ProtoMajor < 2
	if !t.tw.h1 {
		t.detached = findDetached(c.w)
	}
	t.ctx = ctx
	if m.timeout > 0 {
		now := time.Now()
		dl := now.Add(m.timeout)
		t.own = true
		if pd, ok := ctx.Deadline(); ok && pd.Before(dl) {
			dl, t.own = pd, false // a budget from upstream ends first
		}
		t.dctx.Init(ctx, dl)
		t.ctx = &t.dctx
		// Every field fire reads is set: it may run at once.
		t.budget = dl.Sub(now)
		t.timed = true
		t.node.Owner = t
		if !m.deadlines.Add(&t.node, now, t.budget) {
			t.timer = time.AfterFunc(t.budget, t.Fire)
		}
	} else if custom && ctx.Done() != nil {
		t.stop = context.AfterFunc(ctx, t.ctxDone)
	}
	completed := false
	defer func() { t.finish(completed, res) }()
	c.invoke(&t.tw, r.WithContext(t.ctx))
	completed = true
}

// Fire is the middleware's deadline, on the timer's goroutine.
func (t *timedRequest) Fire() {
	tw := &t.tw
	tw.mu.Lock()
	if (tw.state != stateOpen && tw.state != stateCommitted) || t.clientGone() {
		tw.mu.Unlock()
		return
	}
	// Cancel first, so a handler that watches its context stops while the
	// 504 is being written; it cannot write meanwhile (the lock is held).
	t.dctx.End(context.DeadlineExceeded, t.m.timeoutErr)
	late := t.expireLocked()
	tw.mu.Unlock()
	if late && t.own {
		t.m.emitTimeout(t.ctx)
	}
}

// emitTimeout reports that the middleware's own timeout ended a request
// before its handler returned, for every entry point alike. A deadline of
// the caller's that came first is not reported (the request still gets
// its 504), as core's timeout strategy does not report it: the caller set
// it, and sees it end.
func (m *Middleware) emitTimeout(ctx context.Context) {
	m.timeoutTel.Emit(ctx, event.Event{Name: event.Timeout, Duration: m.timeout, Err: m.timeoutErr})
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
	t.m.lateBegins()
	t.tw.expireLocked()
	if t.detached != nil && t.tw.state == stateTimedOut {
		// The 504 is whole: ServeHTTP returns, and HTTP/2 ends the stream.
		t.detached.signalTimedOut()
	}
	return true
}

// timeoutResponse is the 504 sent at the deadline, rendered like every
// other rejection, with its Content-Length value. Without a Render hook it
// is the constant default and allocates nothing.
func (t *timedRequest) timeoutResponse() (Response, []string) {
	m := t.m
	if m.opts.Render == nil {
		return respTimeout, timeoutContentLengthValue
	}
	cause := error(m.timeoutErr)
	if t.ctx.Err() != nil {
		cause = context.Cause(t.ctx) // a custom pipeline's timeout, an upstream deadline
	}
	resp, ok := m.Render(cause)
	if !ok {
		resp = respTimeout
	}
	return resp, []string{strconv.Itoa(len(resp.Body))}
}

// stopTimer takes t off the deadline list, or stops its own timer. If the
// deadline is being answered at this moment, fire finds the writer's state
// and acts on it.
func (t *timedRequest) stopTimer() {
	if t.timer != nil {
		t.timer.Stop()
		return
	}
	t.m.deadlines.Remove(&t.node)
}

// untime stops timing a hijacked request. Called with tw.mu held.
func (t *timedRequest) untime() {
	if t.timed {
		t.stopTimer() // if it already fired, fire finds the state hijacked
		t.dctx.Untime()
	}
	if t.stop != nil {
		t.stop()
	}
}

// finish runs when the handler returns or panics (completed false), on
// the request's goroutine, before ServeHTTP returns.
func (t *timedRequest) finish(completed bool, res *result) {
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
	// A handler that returned without a word after the request's own
	// context ended must not leave net/http to send an empty 200: the
	// connection is aborted if the client left, and the server's
	// cancellation (shutdown) is answered with a 503.
	ended := completed && !expired && t.clientGone()
	tw := &t.tw
	tw.mu.Lock()
	var before writerState
	abort := false
	if ended && tw.state == stateOpen && tw.code == 0 && tw.body == nil {
		before = stateOpen
		// Asked only while the response is open, so ServeHTTP has not
		// returned (net/http panics on CloseNotify after it has); the lock
		// keeps the deadline timer from answering meanwhile.
		if clientGone(tw.w) {
			abort = true
			tw.state = stateDone
		} else {
			resp, _ := t.m.Render(errShuttingDown)
			tw.state = stateDone
			tw.status = int16(resp.Status)
			WriteResponse(tw.w, resp)
		}
	} else {
		before = tw.finishLocked(completed, expired)
	}
	if res != nil {
		*res = result{completed: completed, state: before, status: int(tw.status), clientGone: t.clientGone()}
	}
	if tw.late {
		tw.late = false
		t.m.lateEnds()
	}
	tw.mu.Unlock()
	if t.timed {
		t.dctx.End(context.Canceled, nil)
	}
	if abort || (completed && before == stateAborted) {
		// The response was committed and cut at the deadline: make
		// net/http drop the connection rather than end the response as if
		// it were whole. A panic in the handler propagates as itself.
		panic(http.ErrAbortHandler)
	}
}

// fnDeadline times one callback (Execute, ExecuteInPlace): its context
// under the timeout, its place on the middleware's deadline list and,
// under ExecuteInPlace, who answers the deadline, in one allocation (where
// context.WithTimeoutCause alone costs four). The context behaves as that
// one: at the timeout Err is context.DeadlineExceeded and Cause the
// middleware's *resilience.TimeoutRejectedError; an earlier deadline of
// the parent ends it with the parent's error and cause. It is not pooled:
// a deadline that fired as fn returned may still run Fire afterwards,
// which then finds the context ended, or the call returned, and leaves.
type fnDeadline struct {
	m      *Middleware
	parent context.Context
	armed  bool // the middleware's timeout is on the list (or its own timer)
	dctx   deadline.Context
	node   deadline.Node
	timer  *time.Timer // when the deadline list could not take it

	// onExpire is ExecuteInPlace's expired, called once the deadline has
	// won, under mu (so that finish waits for it), on the deadline's
	// goroutine; nil under Execute.
	onExpire func(cause error)
	mu       sync.Mutex
	state    uint8 // fnRunning, fnReturned or fnExpired
}

const (
	fnRunning uint8 = iota
	fnReturned
	fnExpired
)

// Fire is the timeout, on the deadline's goroutine.
func (d *fnDeadline) Fire() {
	d.dctx.End(context.DeadlineExceeded, d.m.timeoutErr)
	if d.onExpire != nil && d.dctx.EndedWith(d.m.timeoutErr) {
		d.deadlinePassed(d.m.timeoutErr)
	}
}

// start arms the timeout for fn's context under the parent.
func (d *fnDeadline) start() {
	now := time.Now()
	dl := now.Add(d.m.timeout)
	if pd, ok := d.parent.Deadline(); ok && pd.Before(dl) {
		dl = pd // reported as the deadline; the parent's own ends the context then
	}
	d.dctx.Init(d.parent, dl)
	d.node.Owner = d
	d.armed = true
	if !d.m.deadlines.Add(&d.node, now, d.m.timeout) {
		d.timer = time.AfterFunc(d.m.timeout, d.Fire)
	}
}

// deadlinePassed answers the deadline, ended with cause, if that is a
// timeout and fn has not returned: the call counts as late before the
// adapter is told, so whoever sees the 504 sees the late handler.
func (d *fnDeadline) deadlinePassed(cause error) {
	if !isTimeout(cause) {
		return
	}
	d.mu.Lock()
	if d.state != fnRunning {
		d.mu.Unlock()
		return
	}
	d.state = fnExpired
	d.m.lateBegins()
	func() {
		defer d.mu.Unlock() // a panicking expired must not keep fn's return waiting
		d.onExpire(cause)
	}()
	if m := d.m; cause == error(m.timeoutErr) {
		m.emitTimeout(d.parent)
	}
}

// finish runs when fn returns or panics: the timeout is disarmed and the
// context ended, as a CancelFunc does, and a call answered at its
// deadline is late no more, once expired has returned.
func (d *fnDeadline) finish() {
	if d.armed {
		if d.timer != nil {
			d.timer.Stop()
		} else {
			d.m.deadlines.Remove(&d.node)
		}
		d.dctx.End(context.Canceled, nil)
	}
	if d.onExpire != nil {
		d.mu.Lock()
		if d.state == fnExpired {
			d.m.lateEnds()
		} else {
			d.state = fnReturned
		}
		d.mu.Unlock()
	}
}

// runFn runs a callback with the timeout. Under ExecuteInPlace
// (c.expired set), the deadline is answered when it passes, not when fn
// returns.
func (m *Middleware) runFn(ctx context.Context, c *call) error {
	if m.timeout == 0 && c.expired == nil {
		return c.fn(ctx)
	}
	d := &fnDeadline{m: m, parent: ctx, onExpire: c.expired}
	tctx := ctx
	if m.timeout > 0 {
		d.start()
		tctx = &d.dctx
	}
	defer d.finish()
	if c.expired != nil && ctx.Done() != nil {
		// The middleware's own timeout is answered by Fire; this watches
		// what can end ctx earlier: an upstream deadline, or a custom
		// pipeline's timeout.
		stop := context.AfterFunc(ctx, func() { d.deadlinePassed(context.Cause(ctx)) })
		defer stop()
	}
	err := c.fn(tctx)
	if m.timeout > 0 && context.Cause(tctx) == error(m.timeoutErr) {
		if c.expired == nil {
			m.emitTimeout(ctx)
		}
		return m.timeoutErr
	}
	return err
}
