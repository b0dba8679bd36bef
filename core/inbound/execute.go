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
// *resilience.RateLimitRejectedError, a *resilience.BulkheadRejectedError,
// the context's error when ctx ended while queued, or a
// *resilience.TimeoutRejectedError when the timeout fired before fn
// returned, whatever fn returned. fn's panics propagate after its permit
// is returned. To answer at the deadline while fn runs on, use
// ExecuteInPlace.
func (m *Middleware) Execute(ctx context.Context, raw any, fn func(ctx context.Context) error) error {
	if fn == nil {
		return resilience.ErrNilCallback
	}
	c := call{ctx: ctx, raw: raw, fn: fn}
	return m.dispatch(&c)
}

// timedCall is one ExecuteInPlace: whichever of fn's return and the
// deadline comes first decides, under mu, whether expired is called.
type timedCall struct {
	m *Middleware
	// onExpire is ExecuteInPlace's expired, called once the deadline has
	// won, outside mu, on the deadline's goroutine.
	onExpire func(cause error)

	mu    sync.Mutex
	state uint8 // timedRunning, timedReturned or timedExpired
}

const (
	timedRunning uint8 = iota
	timedReturned
	timedExpired
)

// expire answers the deadline with cause, if fn has not returned.
func (tc *timedCall) expire(cause error) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.state != timedRunning {
		return false
	}
	tc.state = timedExpired
	// Counted before the caller can answer, so whoever sees the 504 sees
	// the late handler.
	tc.m.lateBegins()
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
	tc     *timedCall // ExecuteInPlace's, answered at the deadline; or nil
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

// runFn runs Execute's callback with the timeout. Under ExecuteInPlace
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
