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

// timing is the deadline engine, one per timed request, for every entry
// point: it arms the request's deadline (the middleware's timeout, or an
// earlier one of the parent context) on the middleware's deadline list or
// a timer of its own, ends the handler's context when it passes, has the
// request's answerer answer it while the handler runs on, and counts the
// handler late until it returns. The context behaves as
// context.WithTimeoutCause's: at the timeout Err is
// context.DeadlineExceeded and Cause the middleware's
// *resilience.TimeoutRejectedError; an earlier deadline of the parent ends
// it with the parent's error and cause.
//
// It is embedded in the request's one allocation and not pooled: a
// deadline that fired as the handler returned may still run Fire
// afterwards, which then finds the request ended and leaves.
type timing struct {
	m      *Middleware
	tc     *timeoutConf     // the middleware's timeout when armed (Reconfigure may replace it)
	dctx   deadline.Context // also holds the parent: what ctx derives from
	node   deadline.Node
	client context.Context // the request's own: ended means the client left
	// rare holds what only a request off the common path uses, allocated
	// by arm when one needs it (nil on the common path).
	rare *timingRare
	// ans answers the deadline in the entry point's terms: the timed
	// writer's 504, or ExecuteInPlace's expired. Nil under Execute, whose
	// caller reports the timeout once fn returns.
	ans answerer

	mu    sync.Mutex // also the timed writer's
	kind  deadlineKind
	phase phase
	// owned: the parent's end reaches the handler's context through pass
	// (set once, by arm), not by itself.
	owned bool
}

// timingRare is the part of a timing that the common case (a deadline
// the list takes, no watch on the parent, no shadow) never uses: kept
// behind one pointer, so that the request's one allocation stays in a
// smaller size class. Set by arm, on the request's goroutine, and read
// only by disarm there (Fire and pass never read it).
type timingRare struct {
	timer *time.Timer // its own timer, when the deadline list could not take it
	stop  func() bool // the watch on a custom pipeline's context, or an earlier parent's
	// shadowT counts the timeout of a request whose timeout runs in
	// shadow (Options.Shadow.Timeout), instead of answering it.
	shadowT shadowTimer
}

// extra returns t.rare, allocated on first use (by arm only).
func (t *timing) extra() *timingRare {
	if t.rare == nil {
		t.rare = &timingRare{}
	}
	return t.rare
}

// deadlineKind is which deadline times a request, set once by arm.
type deadlineKind uint8

const (
	untimed      deadlineKind = iota // no deadline of the middleware or the caller
	ownTimeout                       // Options.Timeout: reported as the middleware's timeout
	earlierLimit                     // a caller's or an upstream deadline, before the timeout
)

// phase is where a timed request stands. Each transition has one owner
// and happens under mu:
//
//	             pass (the deadline, once)
//	running ────────────────────────────────▶ answered
//	│  │                                          │
//	│  │ returnedLocked                           │ returnedLocked
//	│  ▼                                          ▼
//	│ returned                               lateReturned
//	│
//	└─ untime (Hijack) ──▶ untimedNow
//
// pass answers the deadline (the 504, an adapter's answer) and counts
// the request timed out and late at that moment; returnedLocked, at the
// handler's return, ends the late count. Nothing is answered from
// returned, lateReturned or untimedNow.
type phase uint8

const (
	running      phase = iota // the handler runs, its deadline not answered
	answered                  // answered and counted timed out; the handler runs on, late
	returned                  // the handler returned before any answer
	lateReturned              // the handler returned after its answer
	untimedNow                // hijacked: no longer timed, nothing to answer
)

// answeredEarly reports whether the deadline was answered, and the
// request counted, before the handler returned.
func (t *timing) answeredEarly() bool { return t.phase == answered || t.phase == lateReturned }

// ctx is the handler's context: the deadline's once timed, else the
// parent (the request's own context, or a custom pipeline's). Kept as
// methods rather than fields: the request's one allocation stays in a
// smaller size class.
func (t *timing) ctx() context.Context {
	if t.kind != untimed || t.owned {
		return &t.dctx
	}
	return t.dctx.Parent()
}

// parent is what the handler's context derives from.
func (t *timing) parent() context.Context { return t.dctx.Parent() }

// answerer is how an entry point answers a deadline that passed while its
// handler runs on: called once, with timing.mu held (so the handler's
// return waits for it), after the request counts late, with the cause to
// render.
type answerer interface{ expireLocked(cause error) }

// expireFunc is ExecuteInPlace's expired as an answerer.
type expireFunc func(cause error)

func (f expireFunc) expireLocked(cause error) { f(cause) }

// isTimeout reports whether a context ended because time ran out (ours, a
// custom pipeline's timeout strategy, or an upstream deadline).
func isTimeout(cause error) bool {
	return errors.Is(cause, resilience.ErrTimeoutRejected) || errors.Is(cause, context.DeadlineExceeded)
}

// arm times a request whose handler runs with parent (the request's own
// context, client, or a custom pipeline's). Its deadline is the earliest
// of the middleware's timeout and caller, a deadline the adapter read
// from the call (ServeAnswering; zero: none), and goes on the list; the
// parent's, when earlier, is the context's deadline, and when an
// answerer must answer it, the timer's (without one the parent's end
// reaches the context by itself). Under a custom pipeline (custom) an
// answerer also watches parent for the pipeline's own timeout. ans must
// be set before: the deadline may fire at once.
//
// Whenever the parent may end the handler's context by time while an
// answerer must answer it (a custom pipeline's timeout, an upstream
// deadline before ours), the engine owns that end: the handler's context
// ends in pass, under mu, with the answer, so a handler that ends a
// committed stream when its context ends cannot write its own end between
// the two and have the answerer's follow it.
func (t *timing) arm(m *Middleware, parent, client context.Context, arrival, caller time.Time, custom bool) {
	t.m, t.client, t.tc = m, client, m.tconf.Load()
	t.dctx.Init(parent, time.Time{})
	watch := custom
	own := m.hasTimeout
	if own && m.shadow.timeout.Load() > 0 && shadowed(&m.shadow.timeout) {
		// In shadow the timeout only counts (shadow.go); a caller's
		// deadline still times the request.
		own = false
		t.extra().shadowT = m.startShadowTimer(parent, arrival, t.tc)
	}
	if own || !caller.IsZero() {
		now := time.Now()
		var at time.Time
		t.kind = earlierLimit
		if own {
			at = handlerDeadline(now, t.tc.d, arrival)
			t.kind = ownTimeout
		}
		if !caller.IsZero() && (at.IsZero() || caller.Before(at)) {
			at, t.kind = caller, earlierLimit
		}
		dl := at
		if pd, ok := parent.Deadline(); ok && pd.Before(at) {
			dl = pd // a budget from upstream ends first
			if t.ans != nil {
				at, t.kind = pd, earlierLimit
				watch = true
			}
		}
		t.dctx.Init(parent, dl) // dl is at whenever an answerer answers it
		t.node.Owner = t
		if budget := at.Sub(now); !m.deadlines.Add(&t.node, now, budget) {
			t.extra().timer = time.AfterFunc(budget, t.Fire)
		}
	}
	if t.ans != nil && watch && parent.Done() != nil {
		t.owned = true
		t.dctx.Own()
		t.extra().stop = context.AfterFunc(parent, t.parentDone)
	}
}

// Fire is the deadline, on the timer's goroutine.
func (t *timing) Fire() {
	if t.ans == nil {
		t.dctx.End(context.DeadlineExceeded, t.tc.cause())
		return
	}
	if t.pass(true) && t.kind == ownTimeout {
		t.m.emitTimeout(t.parent(), t.tc)
	}
}

// parentDone runs when the parent ends (a custom pipeline's context, or
// one with an earlier deadline): its timeout is answered like the
// middleware's own.
func (t *timing) parentDone() { t.pass(false) }

// pass answers the deadline if the handler still runs and its client is
// still there: first, for the timer (fire), the handler's context ends,
// so a handler that watches it stops while the answer is written (it
// cannot write meanwhile: mu is held). The handler counts late before the
// answer goes out, so whoever sees the answer sees the late handler. It
// reports whether it answered (for the timer: and ended the context; a
// handler returning at that moment may have, see timedRequest.expireNow).
func (t *timing) pass(fire bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock() // a panicking answerer must not keep the return waiting
	if !fire && t.owned {
		t.dctx.End(t.parent().Err(), nil) // the parent's error and cause
	}
	if t.phase != running || t.clientGone() {
		return false
	}
	first := true
	if fire {
		var cause error
		if t.kind == ownTimeout {
			cause = t.tc.err
		}
		first = t.dctx.End(context.DeadlineExceeded, cause)
	} else if !isTimeout(context.Cause(t.parent())) {
		return false
	}
	t.phase = answered
	t.m.lateBegins()
	t.m.requests.timedOut.Add(1) // counted as it is answered, not when the handler returns
	t.ans.expireLocked(context.Cause(t.ctx()))
	return first
}

// clientGone reports whether the request's own context ended for a reason
// other than time: the client disconnected or the server is shutting down.
// Then no deadline is answered.
func (t *timing) clientGone() bool {
	return t.client.Err() != nil && !isTimeout(context.Cause(t.client))
}

// disarm takes the deadline off the list (or stops its timer) and the
// watch off the parent, when the handler returns or is no longer timed. A
// deadline being answered at this moment finds the request's state and
// acts on it.
func (t *timing) disarm() {
	r := t.rare
	if r == nil {
		if t.kind != untimed {
			t.m.deadlines.Remove(&t.node)
		}
		return
	}
	r.shadowT.stop()
	if t.kind != untimed {
		if r.timer != nil {
			r.timer.Stop()
		} else {
			t.m.deadlines.Remove(&t.node)
		}
	}
	if r.stop != nil {
		r.stop()
	}
}

// returnedLocked records that the handler returned: nothing is answered
// from now on, and a late handler is late no more. mu held.
func (t *timing) returnedLocked() {
	switch t.phase {
	case running:
		t.phase = returned
	case answered:
		t.phase = lateReturned
		t.m.lateEnds()
	}
}

// endCtx ends the handler's context once it returned, as a CancelFunc
// does.
func (t *timing) endCtx() {
	if t.kind != untimed || t.owned {
		t.dctx.End(context.Canceled, nil)
	}
}

// finish is the end of a timed callback: disarmed, returned (after a
// running expired), its context ended.
func (t *timing) finish() {
	t.disarm()
	if t.ans != nil {
		t.mu.Lock()
		t.returnedLocked()
		t.mu.Unlock()
	}
	t.endCtx()
}

// emitTimeout reports that the middleware's own timeout ended a request
// before its handler returned, for every entry point alike. A deadline of
// the caller's that came first is not reported (the request still gets
// its 504), as core's timeout strategy does not report it: the caller set
// it, and sees it end.
func (m *Middleware) emitTimeout(ctx context.Context, tc *timeoutConf) {
	m.timeoutTel.Emit(ctx, event.Event{Name: event.Timeout, Duration: tc.d, Err: tc.err})
}

// runFn runs a callback (Execute, ExecuteInPlace) with the timeout, under
// a custom pipeline's context when custom. Under ExecuteInPlace
// (c.expired set), the deadline is answered when it passes, not when fn
// returns.
func (m *Middleware) runFn(ctx context.Context, c *call, custom bool) error {
	if !m.hasTimeout && c.expired == nil {
		return c.fn(ctx)
	}
	t := &timing{}
	if c.expired != nil {
		t.ans = expireFunc(c.expired)
	}
	t.arm(m, ctx, c.ctx, c.arrival, time.Time{}, custom)
	defer func() {
		t.finish()
		c.counted = t.answeredEarly()
	}()
	err := c.fn(t.ctx())
	if m.hasTimeout && context.Cause(t.ctx()) == error(t.tc.err) {
		if c.expired == nil {
			m.emitTimeout(ctx, t.tc)
		}
		return t.tc.err
	}
	return err
}

// timedRequest is a timed net/http request (Handler, Serve,
// ServeAnswering): the engine and the timed writer that answers its
// deadline, in one allocation.
type timedRequest struct {
	timing
	tw timeoutWriter
	// detached is told when the deadline's answer is out, so that
	// ServeHTTP returns: HTTP/2 under Handler or DetachHTTP2, every
	// request under ServeAnswering. Nil otherwise.
	detached *detachedWriter
}

// serveTimed runs c's handler with the timed writer and ctx, timed by the
// middleware's timeout, the caller's deadline (ServeAnswering) and, under
// a custom pipeline (custom), by the pipeline's. A non-nil res receives
// how the request ended (for the adaptive limiter), even if it panicked.
func (m *Middleware) serveTimed(ctx context.Context, c *call, custom bool, res *result) {
	r := c.r
	t := c.timed
	if t == nil {
		t = &timedRequest{}
	}
	t.tw.w = c.w
	t.tw.owner = t
	t.tw.h1 = r.ProtoMajor < 2
	switch {
	case c.ans != nil:
		t.tw.ans = c.ans
		t.detached = c.detached
	case !t.tw.h1:
		if t.detached = findDetached(c.w); t.detached == nil && c.next == nil {
			m.warnUndetached(r)
		}
	}
	t.ans = t
	t.arm(m, ctx, r.Context(), c.arrival, c.deadline, custom)
	completed := false
	defer func() { t.finish(completed, res) }()
	c.invoke(&t.tw, r.WithContext(t.ctx()))
	completed = true
}

// invoke calls the rest of the chain with the writer and request to use.
func (c *call) invoke(w http.ResponseWriter, r *http.Request) {
	if c.next != nil {
		c.next.ServeHTTP(w, r)
		return
	}
	c.cont(w, r, c.raw)
}

// expireLocked answers the deadline with the timed writer: the 504 (or
// the adapter's answer), or the committed response ended or cut. A
// detached request's ServeHTTP may return once the answer is whole, or
// abort once no write of the handler's is under way.
func (t *timedRequest) expireLocked(error) {
	t.tw.expireLocked()
	if t.detached == nil {
		return
	}
	switch {
	case t.tw.state == stateTimedOut:
		t.detached.signalTimedOut(false)
	case t.tw.state == stateAborted && t.tw.ans != nil && !t.tw.sending:
		t.detached.signalTimedOut(true)
	}
}

// timeoutResponse is the 504 sent at the deadline, rendered like every
// other rejection, with its Content-Length value. Without a Render hook it
// is the constant default and allocates nothing.
func (t *timedRequest) timeoutResponse() (Response, []string) {
	m := t.m
	if m.opts.Render == nil && !m.draining.Load() { // draining: Render adds Connection: close
		return respTimeout, timeoutContentLengthValue
	}
	cause := t.tc.cause()
	if t.ctx().Err() != nil {
		cause = context.Cause(t.ctx()) // a custom pipeline's timeout, an upstream deadline
	}
	resp, ok := m.render(cause)
	if !ok {
		resp = respTimeout
	}
	return resp, []string{strconv.Itoa(len(resp.Body))}
}

// expireNow ends the handler's context at a deadline whose timer has not
// run, as Fire would (the timer, if it runs yet, finds the request ended).
func (t *timedRequest) expireNow() {
	var cause error
	if t.kind == ownTimeout {
		cause = t.tc.err
	}
	if t.dctx.End(context.DeadlineExceeded, cause) && t.kind == ownTimeout {
		t.m.emitTimeout(t.parent(), t.tc)
	}
}

// untime stops timing a hijacked request. Called with mu held.
func (t *timedRequest) untime() {
	t.disarm() // if it already fired, Fire finds the request ended
	t.phase = untimedNow
	if t.kind != untimed {
		t.dctx.Untime()
	}
}

// finish runs when the handler returns or panics (completed false), on
// the request's goroutine, before ServeHTTP returns.
func (t *timedRequest) finish(completed bool, res *result) {
	t.disarm()
	if t.owned && t.parent().Err() != nil {
		// The parent ended and its watch has not run yet: the handler's
		// context ends here, as the parent's would have ended it.
		t.dctx.End(t.parent().Err(), nil)
	}
	if completed && t.tw.ans != nil && t.kind != untimed && t.ctx().Err() == nil && !time.Now().Before(t.dctx.At()) {
		// The deadline passed and its timer has not answered yet: it is
		// answered here, as it would have been (the handler may have
		// returned on a deadline of its own, a moment later than ours).
		t.expireNow()
	}
	// The handler may have returned because its context ended before any
	// callback answered (an upstream deadline, or a pipeline timeout whose
	// callback has not run yet): then the 504 is sent here.
	expired := completed && t.ctx().Err() != nil && isTimeout(context.Cause(t.ctx())) && !t.clientGone()
	// A handler that returned without a word after the request's own
	// context ended must not leave net/http to send an empty 200: the
	// connection is aborted if the client left, and the server's
	// cancellation (shutdown) is answered with a 503.
	ended := completed && !expired && t.clientGone()
	tw := &t.tw
	t.mu.Lock()
	var before writerState
	abort := false
	if ended && tw.state == stateOpen && tw.code == 0 && tw.body == nil {
		before = stateOpen
		// Asked only while the response is open, so ServeHTTP has not
		// returned (net/http panics on CloseNotify after it has); the lock
		// keeps the deadline timer from answering meanwhile. An adapter's
		// answerer has its own protocol: its call is aborted.
		if tw.ans != nil || clientGone(tw.w) {
			abort = true
			tw.state = stateDone
		} else {
			resp, _ := t.m.render(errShuttingDown)
			tw.state = stateDone
			tw.status = int16(resp.Status)
			writeResponse(tw.w, resp)
		}
	} else {
		before = tw.finishLocked(completed, expired)
	}
	t.returnedLocked()
	if res != nil {
		*res = result{completed: completed, state: before, status: int(tw.status), clientGone: t.clientGone(), counted: t.answeredEarly()}
	}
	t.mu.Unlock()
	t.endCtx()
	if abort || (completed && before == stateAborted) {
		// The response was committed and cut at the deadline: make
		// net/http drop the connection rather than end the response as if
		// it were whole. A panic in the handler propagates as itself.
		panic(http.ErrAbortHandler)
	}
}
