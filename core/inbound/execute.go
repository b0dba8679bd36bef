package inbound

import (
	"context"
	"sync"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/internal/deadline"
)

// Execute runs fn through the inbound pipeline, for an adapter of a
// framework not built on net/http, when its response can only go out once
// fn returns: raw is the framework's own request object (Request.Raw,
// and what Framework.View and Framework.Route read). fn gets ctx, ending at
// the timeout (under a custom pipeline, the pipeline's context).
//
// It returns fn's error, or a rejection to pass to Render: a
// *resilience.RateLimitRejectedError, a *resilience.ConcurrencyLimitRejectedError,
// the context's error when ctx ended while queued, or a
// *resilience.TimeoutRejectedError when the timeout fired before fn
// returned, whatever fn returned. fn's panics propagate after its permit
// is returned. To answer at the deadline while fn runs on, use
// ExecuteTimed.
func (m *Middleware) Execute(ctx context.Context, raw any, fn func(ctx context.Context) error) error {
	if fn == nil {
		return resilience.ErrNilCallback
	}
	c := call{ctx: ctx, raw: raw, fn: fn}
	return m.dispatch(&c)
}

// ExecuteTimed is Execute that returns at the deadline: for an adapter
// that must send the 504 on time while the handler still runs (fasthttp,
// whose response goes out when the adapter's handler returns).
//
// With Options.Timeout set or a custom Pipeline, when the deadline (the
// timeout, an earlier deadline of ctx, or a timeout strategy of the
// pipeline) passes before fn returns,
// ExecuteTimed returns a *resilience.TimeoutRejectedError (or the
// context's error) at once, for the adapter to send Render's 504, while fn
// runs on with its context ended: it keeps its permit until it returns,
// and Stats counts it as late meanwhile. The adapter must then make sure
// nothing fn writes later reaches the client (fasthttp:
// RequestCtx.TimeoutErrorWithResponse). Otherwise, and always without a
// Timeout or a Pipeline (ctx's own deadline then ends fn's context but
// not the wait), it is Execute.
//
// With a Timeout or a Pipeline, fn runs on a goroutine of its own and
// ExecuteTimed waits for it. A panic in fn is re-raised by
// ExecuteTimed if it is still waiting; after the deadline it is dropped,
// as net/http's TimeoutHandler does, since no one is left to answer.
func (m *Middleware) ExecuteTimed(ctx context.Context, raw any, fn func(ctx context.Context) error) error {
	if fn == nil {
		return resilience.ErrNilCallback
	}
	if !m.Timed() {
		return m.Execute(ctx, raw, fn) // nothing can end it early
	}
	tc := &timedCall{m: m, done: make(chan struct{})}
	c := call{ctx: ctx, raw: raw, fn: fn, timed: tc}
	go tc.run(&c)
	<-tc.done
	tc.mu.Lock()
	defer tc.mu.Unlock()
	switch {
	case tc.state == timedExpired:
		return tc.err
	case tc.panicked:
		panic(tc.panicVal)
	}
	return tc.err
}

// timedCall is one ExecuteTimed or ExecuteInPlace: whichever of fn's
// return and the deadline comes first decides, under mu, what the caller
// returns.
type timedCall struct {
	m    *Middleware
	done chan struct{} // ExecuteTimed's: closed once the caller may return
	// onExpire is ExecuteInPlace's expired, called once the deadline has
	// won, outside mu, on the deadline's goroutine.
	onExpire func(cause error)

	mu       sync.Mutex
	state    uint8 // timedRunning, timedReturned or timedExpired
	err      error
	panicked bool
	panicVal any
}

const (
	timedRunning uint8 = iota
	timedReturned
	timedExpired
)

func (tc *timedCall) run(c *call) {
	panicked := true
	var err error
	defer func() {
		var p any
		if panicked {
			p = recover()
		}
		tc.mu.Lock()
		switch tc.state {
		case timedRunning:
			tc.state = timedReturned
			tc.err, tc.panicked, tc.panicVal = err, panicked, p
			close(tc.done)
		case timedExpired:
			tc.m.late.Add(-1) // fn ended: no longer late
		}
		tc.mu.Unlock()
	}()
	err = tc.m.dispatch(c)
	panicked = false
}

// expire answers the deadline with cause, if fn has not returned.
func (tc *timedCall) expire(cause error) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.state != timedRunning {
		return false
	}
	tc.state = timedExpired
	tc.err = cause
	// Counted before the caller can answer, so whoever sees the 504 sees
	// the late handler.
	tc.m.late.Add(1)
	tc.m.lateTotal.Add(1)
	if tc.done != nil {
		close(tc.done)
	}
	return true
}

// deadlinePassed answers the deadline of fn's context, ended with cause,
// if that is a timeout and fn has not returned; ctx is for telemetry.
func (tc *timedCall) deadlinePassed(ctx context.Context, cause error) {
	if !isTimeout(cause) || !tc.expire(cause) {
		return
	}
	if tc.onExpire != nil {
		tc.onExpire(cause)
	}
	if m := tc.m; cause == error(m.timeoutErr) {
		m.emitTimeout(ctx)
	}
}

// fnDeadline is the timeout of one Execute callback: its context and its
// place on the middleware's deadline list, in one allocation (where
// context.WithTimeoutCause costs four). It behaves as that context: at the
// timeout Err is context.DeadlineExceeded and Cause the middleware's
// *resilience.TimeoutRejectedError; an earlier deadline of the parent ends
// it with the parent's error and cause. It is not pooled: a deadline that
// fired as fn returned may still run Fire afterwards, which then finds the
// context ended and leaves.
type fnDeadline struct {
	m      *Middleware
	parent context.Context
	tc     *timedCall // ExecuteTimed's or ExecuteInPlace's, answered at the deadline; or nil
	dctx   deadline.Context
	node   deadline.Node
	timer  *time.Timer // when the deadline list could not take it
}

// Fire is the timeout, on the deadline's goroutine.
func (d *fnDeadline) Fire() {
	d.dctx.End(context.DeadlineExceeded, d.m.timeoutErr)
	if d.tc != nil && d.dctx.EndedWith(d.m.timeoutErr) {
		d.tc.deadlinePassed(d.parent, d.m.timeoutErr)
	}
}

// start arms the timeout for fn's context under parent.
func (d *fnDeadline) start(parent context.Context) {
	d.parent = parent
	now := time.Now()
	dl := now.Add(d.m.timeout)
	if pd, ok := parent.Deadline(); ok && pd.Before(dl) {
		dl = pd // reported as the deadline; the parent's own ends the context then
	}
	d.dctx.Init(parent, dl)
	d.node.Owner = d
	if !d.m.deadlines.Add(&d.node, now, d.m.timeout) {
		d.timer = time.AfterFunc(d.m.timeout, d.Fire)
	}
}

// stop disarms the timeout and ends the context, as a CancelFunc does.
func (d *fnDeadline) stop() {
	if d.timer != nil {
		d.timer.Stop()
	} else {
		d.m.deadlines.Remove(&d.node)
	}
	d.dctx.End(context.Canceled, nil)
}

// runFn runs Execute's callback with the timeout. Under ExecuteTimed
// (c.timed set), the deadline is answered when it passes, not when fn
// returns.
func (m *Middleware) runFn(ctx context.Context, c *call) error {
	tctx := ctx
	if m.timeout > 0 {
		d := &fnDeadline{m: m, tc: c.timed}
		d.start(ctx)
		tctx = &d.dctx
		defer d.stop()
	}
	if tc := c.timed; tc != nil && ctx.Done() != nil {
		// The middleware's own timeout is answered by its Fire; this
		// watches what can end ctx earlier: an upstream deadline, or a
		// custom pipeline's timeout.
		stop := context.AfterFunc(ctx, func() { tc.deadlinePassed(ctx, context.Cause(ctx)) })
		defer stop()
	}
	err := c.fn(tctx)
	if m.timeout > 0 && context.Cause(tctx) == error(m.timeoutErr) {
		if c.timed == nil {
			m.emitTimeout(ctx)
		}
		return m.timeoutErr
	}
	return err
}
