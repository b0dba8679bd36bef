package inbound

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// deadlineCtx is the handler's context under the middleware's timeout: a
// cancellable context that reports the deadline. It is not a
// context.WithTimeout because a hijacked connection must stop being timed,
// and a timer context cannot be disarmed; here the middleware owns the
// timer and stops it, and the reported deadline goes away with it.
type deadlineCtx struct {
	context.Context // from context.WithCancelCause; children attach to it directly
	deadline        time.Time
	untimed         atomic.Bool
}

func (c *deadlineCtx) Deadline() (time.Time, bool) {
	if c.untimed.Load() {
		return c.Context.Deadline()
	}
	return c.deadline, true
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
	cancel context.CancelCauseFunc
	timer  *time.Timer
	stop   func() bool // context.AfterFunc registration (custom pipeline)
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
// it watches ctx for a pipeline timeout instead.
func (m *Middleware) serveTimed(w http.ResponseWriter, r *http.Request, ctx context.Context, next http.Handler, custom bool) {
	t := &timedRequest{m: m, client: r.Context()}
	t.tw.w = w
	t.tw.owner = t
	t.ctx = ctx
	if m.timeout > 0 {
		now := time.Now()
		dl := now.Add(m.timeout)
		if pd, ok := ctx.Deadline(); ok && pd.Before(dl) {
			dl = pd // a budget from upstream ends first
		}
		cctx, cancel := context.WithCancelCause(ctx)
		t.dctx.Context = cctx
		t.dctx.deadline = dl
		t.cancel = cancel
		t.ctx = &t.dctx
		// Every field fire reads is set: it may run at once.
		t.timer = time.AfterFunc(dl.Sub(now), t.fire)
	} else if custom && ctx.Done() != nil {
		t.stop = context.AfterFunc(ctx, t.ctxDone)
	}
	completed := false
	defer func() { t.finish(completed) }()
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
	t.cancel(t.m.timeoutErr)
	late := t.expireLocked()
	tw.mu.Unlock()
	if late {
		t.m.timeoutTel.Emit(t.ctx, resilience.Event{Name: resilience.EventTimeout, Duration: t.m.timeout, Err: t.m.timeoutErr})
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

// untime stops timing a hijacked request. Called with tw.mu held.
func (t *timedRequest) untime() {
	if t.timer != nil {
		t.timer.Stop() // if it already fired, fire finds the state hijacked
		t.dctx.untimed.Store(true)
	}
	if t.stop != nil {
		t.stop()
	}
}

// finish runs when the handler returns or panics (completed false), on
// the request's goroutine, before ServeHTTP returns.
func (t *timedRequest) finish(completed bool) {
	if t.timer != nil {
		t.timer.Stop()
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
	if tw.late {
		tw.late = false
		t.m.late.Add(-1)
	}
	tw.mu.Unlock()
	if t.cancel != nil {
		t.cancel(context.Canceled)
	}
	if completed && before == stateAborted {
		// The response was committed and cut at the deadline: make
		// net/http drop the connection rather than end the response as if
		// it were whole. A panic in the handler propagates as itself.
		panic(http.ErrAbortHandler)
	}
}
