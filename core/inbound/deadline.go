package inbound

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
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
	tc   *timeoutConf     // the middleware's timeout when armed (Reconfigure may replace it), and the middleware
	dctx deadline.Context // also holds the parent: what ctx derives from
	node deadline.Node
	// rare holds what only a request off the common path uses, allocated
	// by arm when one needs it (nil on the common path).
	rare  *timingRare
	mu    sync.Mutex // also the timed writer's
	kind  deadlineKind
	phase phase
	// owned: the parent's end reaches the handler's context through pass
	// (set once, by arm), not by itself.
	owned bool
	// answers: the deadline is answered in the entry point's terms, by
	// node.Owner (answeredBy): the timed writer's 504, or
	// ExecuteInPlace's expired. False under Execute, whose caller reports
	// the timeout once fn returns.
	answers bool
	// ownClient: rare.client is the request's own context (set by arm
	// before the deadline is armed, so pass may read rare then; a later
	// extra does not move it).
	ownClient bool
}

// timingRare is the part of a timing that the common case (a deadline
// the list takes, no watch on the parent, no shadow, the handler's
// context derived from the request's own) never uses: kept behind one
// pointer, so that the request's one allocation stays in a smaller size
// class. Set by arm, on the request's goroutine, before the deadline is
// armed; read by disarm there, and client also by pass (only when
// ownClient says it is set).
type timingRare struct {
	// client is the request's own context when the handler's derives
	// from another (a custom pipeline's): ended means the client left.
	client context.Context
	timer  *time.Timer // its own timer, when the deadline list could not take it
	stop   func() bool // the watch on a custom pipeline's context, or an earlier parent's
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
// render. It embeds the request's timing, whose Fire it promotes.
type answerer interface {
	deadline.Firer
	expireLocked(cause error)
}

// answeredBy makes a, which embeds t, answer t's deadline: the deadline
// list fires a, and pass finds it there. Before arm. Kept on the node
// rather than in a field of its own: the request's one allocation stays in
// a smaller size class.
func (t *timing) answeredBy(a answerer) {
	t.node.Owner = a
	t.answers = true
}

// inPlace is a timing answered by ExecuteInPlace's expired.
type inPlace struct {
	timing
	expired func(cause error)
}

func (p *inPlace) expireLocked(cause error) { p.expired(cause) }

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
// answerer also watches parent for the pipeline's own timeout. The
// answerer must be set before (answeredBy): the deadline may fire at once.
//
// Whenever the parent may end the handler's context by time while an
// answerer must answer it (a custom pipeline's timeout, an upstream
// deadline before ours), the engine owns that end: the handler's context
// ends in pass, under mu, with the answer, so a handler that ends a
// committed stream when its context ends cannot write its own end between
// the two and have the answerer's follow it.
func (t *timing) arm(m *Middleware, parent, client context.Context, arrival, caller time.Time, custom bool) {
	t.tc = m.tconf.Load()
	if custom {
		// Only a custom pipeline's context differs from the request's own
		// (not compared: a context's type may not be comparable).
		t.extra().client = client
		t.ownClient = true
	}
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
		now := deadline.Now()
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
			if t.answers {
				at, t.kind = pd, earlierLimit
				watch = true
			}
		}
		t.dctx.Init(parent, dl) // dl is at whenever an answerer answers it
		if !t.answers {
			t.node.Owner = t
		}
		if budget := at.Sub(now); !m.deadlines.Add(&t.node, now, budget) {
			t.extra().timer = time.AfterFunc(budget, t.Fire)
		}
	}
	if t.answers && watch && parent.Done() != nil {
		t.owned = true
		t.dctx.Own()
		t.extra().stop = context.AfterFunc(parent, t.parentDone)
	}
}

// Fire is the deadline, on the timer's goroutine.
func (t *timing) Fire() {
	if !t.answers {
		t.dctx.End(context.DeadlineExceeded, t.tc.cause())
		return
	}
	if t.pass(true) && t.kind == ownTimeout {
		t.tc.m.emitTimeout(t.parent(), t.tc)
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
	t.tc.m.lateBegins()
	t.tc.m.requests.timedOut.Add(1) // counted as it is answered, not when the handler returns
	t.node.Owner.(answerer).expireLocked(context.Cause(t.ctx()))
	return first
}

// clientGone reports whether the request's own context ended for a reason
// other than time: the client disconnected or the server is shutting down.
// Then no deadline is answered.
func (t *timing) clientGone() bool {
	client := t.parent()
	if t.ownClient {
		client = t.rare.client
	}
	return client.Err() != nil && !isTimeout(context.Cause(client))
}

// disarm takes the deadline off the list (or stops its timer) and the
// watch off the parent, when the handler returns or is no longer timed. A
// deadline being answered at this moment finds the request's state and
// acts on it.
func (t *timing) disarm() {
	r := t.rare
	if r == nil {
		if t.kind != untimed {
			t.tc.m.deadlines.Remove(&t.node)
		}
		return
	}
	r.shadowT.stop()
	if t.kind != untimed {
		if r.timer != nil {
			r.timer.Stop()
		} else {
			t.tc.m.deadlines.Remove(&t.node)
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
		t.tc.m.lateEnds()
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
	if t.answers {
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
	var t *timing
	if c.expired != nil {
		p := &inPlace{expired: c.expired}
		p.answeredBy(p)
		t = &p.timing
	} else {
		t = &timing{}
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
	// req is the handler's request, r with the deadline's context: held
	// here so that the request's copy shares the timed request's one
	// allocation (WithContext, inlined, copies through the stack).
	req http.Request
}

// answeredRequest is a timed request under ServeAnswering, whose
// deadline ans answers in the adapter's protocol, seeing the body as it
// is sent. The handler's header map then stays private after the commit
// too (the deadline may write trailers to the underlying one), and sends
// are tracked (timeoutWriter.sending). It answers the request's node, so
// its timed writer finds ans there (timeoutWriter.answer): the common
// request carries no field for it.
type answeredRequest struct {
	timedRequest
	ans deadlineAnswer
}

// answer is the adapter's answerer under ServeAnswering, else nil.
func (tw *timeoutWriter) answer() deadlineAnswer {
	if a, ok := tw.owner.node.Owner.(*answeredRequest); ok {
		return a.ans
	}
	return nil
}

// serveTimed runs c's handler with the timed writer and ctx, timed by the
// middleware's timeout, the caller's deadline (ServeAnswering) and, under
// a custom pipeline (custom), by the pipeline's. A non-nil res receives
// how the request ended (for the adaptive limiter), even if it panicked.
func (m *Middleware) serveTimed(ctx context.Context, c *call, custom bool, res *result) {
	r := c.r
	var t *timedRequest
	if c.ans != nil {
		a := c.timed
		if a == nil {
			a = &answeredRequest{}
		}
		a.ans = c.ans
		t = &a.timedRequest
		t.answeredBy(a)
	} else {
		t = &timedRequest{}
		t.answeredBy(t)
	}
	t.tw.w = c.w
	t.tw.owner = t
	t.tw.h1 = r.ProtoMajor < 2
	if !t.tw.h1 && c.ans == nil && c.next == nil && t.detached() == nil {
		m.warnUndetached(r)
	}
	t.arm(m, ctx, r.Context(), c.arrival, c.deadline, custom)
	completed := false
	defer func() { t.finish(completed, res) }()
	t.req = *r.WithContext(t.ctx())
	c.invoke(&t.tw, &t.req)
	completed = true
}

// detached is the detached writer to tell once the deadline's answer is
// out, so that ServeHTTP returns: HTTP/2 under Handler or DetachHTTP2,
// every detached request under ServeAnswering; nil otherwise. Found from
// the writer when a deadline is answered rather than kept in a field: the
// request's one allocation stays within the 512-byte size class.
func (t *timedRequest) detached() *detachedWriter {
	if t.tw.h1 && t.tw.answer() == nil {
		return nil // HTTP/1 runs on the request's goroutine
	}
	return findDetached(t.tw.w)
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
	d := t.detached()
	if d == nil {
		return
	}
	switch {
	case t.tw.state == stateTimedOut:
		d.signalTimedOut(false)
	case t.tw.state == stateAborted && t.tw.answer() != nil && !t.tw.sending:
		d.signalTimedOut(true)
	}
}

// timeoutResponse is the 504 sent at the deadline, rendered like every
// other rejection, with its Content-Length value. Without a Render hook it
// is the constant default and allocates nothing.
func (t *timedRequest) timeoutResponse() (Response, []string) {
	m := t.tc.m
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
		t.tc.m.emitTimeout(t.parent(), t.tc)
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
	if completed && t.tw.answer() != nil && t.kind != untimed && t.ctx().Err() == nil && !deadline.Now().Before(t.dctx.At()) {
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
	if ended && tw.state == stateOpen && tw.status == 0 && tw.body == nil {
		before = stateOpen
		// Asked only while the response is open, so ServeHTTP has not
		// returned (net/http panics on CloseNotify after it has); the lock
		// keeps the deadline timer from answering meanwhile. An adapter's
		// answerer has its own protocol: its call is aborted.
		if tw.answer() != nil || clientGone(tw.w) {
			abort = true
			tw.state = stateDone
		} else {
			resp, _ := t.tc.m.render(errShuttingDown)
			tw.state = stateDone
			tw.status = int16(resp.Status)
			writeResponse(tw.w, resp)
		}
	} else {
		before = tw.finishLocked(completed, expired)
	}
	tw.forgetCopiedLocked()
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

// The timed writer: the http.ResponseWriter of a timed net/http request,
// whose state moves under the engine's lock, beside the engine's phase:
// the handler's writes, the deadline's answer and the handler's return.
// It lives here, with the engine, because the two move together: the
// answer is written in pass, and the writer's end runs inside the
// request's finish, between the engine's disarm and its return.

// writerState is where a timed response stands. Transitions happen under
// the request's timing.mu:
//
//	open ──handler flushes, or writes past the hold──▶ committed ──deadline──▶ aborted
//	  │                                                    │
//	  ├──deadline──▶ timedOut                              └──Hijack──▶ hijacked
//	  └──Hijack──▶ hijacked
//
// and every state ends in done when ServeHTTP returns, after which the
// underlying writer is never touched again. Under an adapter's answerer
// (ServeAnswering) the deadline in the open state sends the adapter's
// answer instead of the 504, and in the committed state the adapter ends
// the response in its protocol (timedOut) when no write is under way and
// it can, else it is aborted.
type writerState uint8

const (
	// stateOpen: nothing sent. The handler's header fields are still its
	// own map, and its status and first bytes are held by the writer, so a
	// 504 can replace the response entirely.
	stateOpen writerState = iota
	// stateCommitted: the handler's response went to the underlying
	// writer (it flushed, or wrote more than the writer holds back).
	stateCommitted
	// stateTimedOut: the 504 was sent at the deadline; the handler's
	// writes are discarded.
	stateTimedOut
	// stateAborted: the deadline passed after the handler committed; no
	// further byte is sent and the connection is dropped when the handler
	// returns.
	stateAborted
	// stateHijacked: the handler owns the connection; no longer timed.
	stateHijacked
	// stateDone: ServeHTTP has returned (or is returning).
	stateDone
)

// holdLimit is how much of the body the writer holds back before it
// commits the response. A status written first and a small body do not
// commit: net/http would not have sent them yet either, and the 504 can
// still replace them. Only a Flush, or a body past the limit, commits.
const holdLimit = 4 << 10

// holdBufs recycles the hold buffers: a request with a small body then
// costs a copy, not an allocation.
var holdBufs = sync.Pool{New: func() any { b := make([]byte, 0, holdLimit); return &b }}

// timeoutWriter is the http.ResponseWriter a timed handler gets. It
// decides, under its request's engine's mutex (timing.mu), whether the
// response is the handler's or the middleware's 504, so that exactly one
// of them reaches the client and a late handler's writes are dropped
// without a data race on the underlying writer.
//
// Until the handler commits, its header map is private, and its status
// and up to holdLimit bytes of body are held here: the 504, written from
// the timer's goroutine, must neither carry the handler's fields nor touch
// a map the handler may be writing to, and a handler that wrote its status
// and then stalled must still get its 504 on time. After the commit,
// writes pass through as they come; the mutex is held only for the state
// change, not during the write, so a handler blocked writing to a slow
// client does not delay the deadline, which then releases it by setting
// the write deadline.
type timeoutWriter struct {
	w     http.ResponseWriter
	owner *timedRequest

	// Touched only by the handler's goroutine.
	h          http.Header // the handler's fields until commit; nil until asked for
	hcommitted bool        // the handler committed (mirrors state for the handler)

	h1 bool // HTTP/1.x: the 504 closes the connection

	// Under owner.mu, the request's engine's (timing.mu).
	state    writerState
	answered bool // the deadline answered: the 504 sent, or the committed response cut
	sending  bool // under ans: a write or flush to w is under way, outside the lock
	// status is, while open, the status held, not sent yet (0: none);
	// from the commit on, the handler's status (200 if implicit).
	status int16
	body   *[]byte // body held, not sent yet (nil: none)
	// copied names the fields copied to w before the commit (1xx, a held
	// status), which the 504 removes: taken from copiedFields on first
	// use and given back once the response leaves stateOpen, so the
	// request's one allocation does not carry it (nil: none).
	copied *[]string
}

// copiedFields recycles the lists of field names copied before a commit:
// a handler that sets its fields and then its status costs a list from
// here, not an allocation.
var copiedFields = sync.Pool{New: func() any { s := make([]string, 0, 8); return &s }}

// Header returns the handler's header map: private until the response is
// committed, the underlying one after (so trailers set late still work).
func (tw *timeoutWriter) Header() http.Header {
	if tw.hcommitted {
		return tw.w.Header()
	}
	if tw.h == nil {
		if tw.answer() != nil {
			tw.h = headerMaps.Get().(http.Header)
		} else {
			tw.h = make(http.Header)
		}
	}
	return tw.h
}

// headerMaps recycles the handler's header maps under an answerer, which
// stay private to the timed writer: a call answered in time gives its map
// back, grown to the protocol's usual fields.
var headerMaps = sync.Pool{New: func() any { return make(http.Header) }}

// recycleHeaderLocked gives the private header map back once the handler
// returned in time and its fields were copied.
func (tw *timeoutWriter) recycleHeaderLocked() {
	if tw.answer() == nil || tw.h == nil {
		return
	}
	clear(tw.h)
	headerMaps.Put(tw.h)
	tw.h = nil
}

// copyHeaderLocked copies the handler's fields to the underlying map,
// remembering them when the response is not committed yet so that a 504
// can remove them.
func (tw *timeoutWriter) copyHeaderLocked(remember bool) {
	if len(tw.h) == 0 {
		return
	}
	dst := tw.w.Header()
	for k, v := range tw.h {
		dst[k] = v
		if remember {
			tw.rememberLocked(k)
		}
	}
}

// rememberLocked notes that field k was copied to w before the commit.
func (tw *timeoutWriter) rememberLocked(k string) {
	if tw.copied == nil {
		tw.copied = copiedFields.Get().(*[]string)
	}
	*tw.copied = append(*tw.copied, k)
}

// forgetCopiedLocked gives the list of copied fields back: once the
// response is committed, timed out or done, no 504 replaces it.
func (tw *timeoutWriter) forgetCopiedLocked() {
	if c := tw.copied; c != nil {
		clear(*c)
		*c = (*c)[:0]
		copiedFields.Put(c)
		tw.copied = nil
	}
}

// commitLocked makes the handler's response the response and hands back
// what was held, for the caller to send (outside the lock, unless the
// handler has returned).
func (tw *timeoutWriter) commitLocked() (code int, body *[]byte) {
	code, body = int(tw.status), tw.body
	if code == 0 {
		tw.copyHeaderLocked(false) // a held status copied them already
	}
	tw.body = nil
	tw.forgetCopiedLocked()
	tw.state = stateCommitted
	tw.hcommitted = tw.answer() == nil
	tw.status = http.StatusOK // Write or Flush without WriteHeader
	if code != 0 {
		tw.status = int16(code) // WriteHeader checked 100..999
	}
	return code, body
}

// sendHeld writes what commitLocked handed back.
func (tw *timeoutWriter) sendHeld(code int, body *[]byte) error {
	if code != 0 {
		tw.w.WriteHeader(code)
	}
	if body == nil {
		return nil
	}
	_, err := tw.w.Write(*body)
	*body = (*body)[:0]
	holdBufs.Put(body)
	return err
}

// dropHeldLocked discards what was held.
func (tw *timeoutWriter) dropHeldLocked() {
	tw.status = 0
	if tw.body != nil {
		*tw.body = (*tw.body)[:0]
		holdBufs.Put(tw.body)
		tw.body = nil
	}
}

// holdLocked keeps p back if it fits, and reports whether it did.
func (tw *timeoutWriter) holdLocked(p []byte) bool {
	if tw.body == nil {
		if len(p) > holdLimit {
			return false
		}
		tw.body = holdBufs.Get().(*[]byte)
	}
	if len(*tw.body)+len(p) > holdLimit {
		return false
	}
	*tw.body = append(*tw.body, p...)
	return true
}

// WriteHeader holds the status (and takes the handler's fields as they are
// now, as net/http does) until the response commits, unless the deadline
// has passed. 1xx informational responses are sent at once, as net/http
// does; 101 Switching Protocols commits.
func (tw *timeoutWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http does
	}
	tw.owner.mu.Lock()
	defer tw.owner.mu.Unlock()
	switch tw.state {
	case stateOpen:
		switch {
		case tw.status != 0:
			// Superfluous: the first status stands, as in net/http.
		case code < 200 && code != http.StatusSwitchingProtocols:
			tw.copyHeaderLocked(true)
			tw.w.WriteHeader(code)
		case code == http.StatusSwitchingProtocols:
			tw.status = int16(code)
			tw.copyHeaderLocked(false)
			c, body := tw.commitLocked()
			_ = tw.sendHeld(c, body)
		default:
			tw.status = int16(code)
			tw.copyHeaderLocked(true)
		}
	case stateCommitted:
		tw.w.WriteHeader(code) // superfluous: net/http logs it
	}
}

// errAfterState is what a write returns once the handler no longer owns
// the response.
func errAfterState(s writerState) error {
	if s == stateHijacked {
		return http.ErrHijacked
	}
	return http.ErrHandlerTimeout
}

// Write holds p while the response is open and the held body stays within
// holdLimit; past it, the response commits and p is sent. After the
// deadline it returns http.ErrHandlerTimeout and p is discarded.
func (tw *timeoutWriter) Write(p []byte) (int, error) {
	tw.owner.mu.Lock()
	switch tw.state {
	case stateOpen:
		if tw.holdLocked(p) {
			tw.owner.mu.Unlock()
			return len(p), nil
		}
		code, body := tw.commitLocked()
		tw.beginSendLocked(body, p)
		tw.owner.mu.Unlock()
		// Outside the lock: the deadline can then abort a write blocked
		// on a slow client. The state is committed, so nothing else
		// writes to w.
		if err := tw.sendHeld(code, body); err != nil {
			tw.endSend()
			return 0, err
		}
	case stateCommitted:
		tw.beginSendLocked(nil, p)
		tw.owner.mu.Unlock()
	default:
		s := tw.state
		tw.owner.mu.Unlock()
		return 0, errAfterState(s)
	}
	n, err := tw.w.Write(p)
	tw.endSend()
	return n, err
}

// beginSendLocked, under an answerer, shows it the body about to be sent
// (what was held, then p) and marks a send under way: the deadline then
// cuts the response rather than end it in the middle of this write.
func (tw *timeoutWriter) beginSendLocked(held *[]byte, p []byte) {
	ans := tw.answer()
	if ans == nil {
		return
	}
	if held != nil {
		ans.Sent(*held)
	}
	if len(p) > 0 {
		ans.Sent(p)
	}
	tw.sending = true
}

// endSend ends a send beginSendLocked began. A deadline that cut the
// response during it left the detached ServeHTTP waiting for this moment:
// the handler no longer touches w, so ServeHTTP may abort now.
func (tw *timeoutWriter) endSend() {
	if tw.answer() == nil {
		return
	}
	tw.owner.mu.Lock()
	tw.sending = false
	if tw.state == stateAborted {
		if d := tw.owner.detached(); d != nil {
			d.signalTimedOut(true)
		}
	}
	tw.owner.mu.Unlock()
}

// FlushError sends what was held and flushes the response to the client,
// committing it: a later deadline aborts the connection instead of
// sending a 504.
func (tw *timeoutWriter) FlushError() error {
	tw.owner.mu.Lock()
	switch tw.state {
	case stateOpen:
		code, body := tw.commitLocked()
		tw.beginSendLocked(body, nil)
		tw.owner.mu.Unlock()
		if err := tw.sendHeld(code, body); err != nil {
			tw.endSend()
			return err
		}
	case stateCommitted:
		tw.beginSendLocked(nil, nil)
		tw.owner.mu.Unlock()
	default:
		s := tw.state
		tw.owner.mu.Unlock()
		return errAfterState(s)
	}
	err := flushUnderlying(tw.w)
	tw.endSend()
	return err
}

// Flush implements http.Flusher.
func (tw *timeoutWriter) Flush() { _ = tw.FlushError() }

// Hijack hands the connection to the handler. From then on the request is
// no longer timed: the deadline neither cancels its context nor touches
// the connection. After the deadline it fails with http.ErrHandlerTimeout.
func (tw *timeoutWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	tw.owner.mu.Lock()
	defer tw.owner.mu.Unlock()
	switch tw.state {
	case stateOpen:
		if tw.status != 0 || tw.body != nil {
			// net/http sends a written response before it hijacks.
			code, body := tw.commitLocked()
			_ = tw.sendHeld(code, body)
		}
	case stateCommitted:
	default:
		return nil, nil, errAfterState(tw.state)
	}
	conn, rw, err := http.NewResponseController(tw.w).Hijack()
	if err == nil {
		tw.forgetCopiedLocked()
		tw.state = stateHijacked
		tw.owner.untime()
	}
	return conn, rw, err
}

// Unwrap gives http.ResponseController the underlying writer for what the
// wrapper does not handle itself (read and write deadlines, full duplex).
func (tw *timeoutWriter) Unwrap() http.ResponseWriter { return tw.w }

// expireLocked acts on the deadline: a complete 504 (rendered through
// Options.Render) if the response is still open, an abort if the handler
// committed. It reports whether the
// handler is now late (still running past its deadline).
func (tw *timeoutWriter) expireLocked() bool {
	if tw.answer() != nil {
		return tw.answerLocked()
	}
	switch tw.state {
	case stateOpen:
		h := tw.discardLocked()
		resp, length := tw.owner.timeoutResponse()
		for k, v := range resp.Header {
			h[k] = v
		}
		h["Content-Length"] = length
		if tw.h1 {
			// The late handler still owns the request's connection: the
			// client must not send another request on it.
			h["Connection"] = []string{"close"}
		}
		tw.w.WriteHeader(resp.Status)
		tw.w.Write(resp.Body) //nolint:errcheck // the client may be gone
		_ = flushUnderlying(tw.w)
		if !tw.h1 && tw.owner.detached() == nil {
			// HTTP/2 ends a stream only when ServeHTTP returns. Handler
			// (and DetachHTTP2 around a framework) detaches the request
			// and returns once this 504 is out (see handler.go); under
			// Serve alone the framework owns the call, so the stream is
			// reset instead, and the client is not held until the
			// handler returns. The connection's other streams go on.
			_ = http.NewResponseController(tw.w).SetWriteDeadline(time.Now())
		}
		tw.state = stateTimedOut
	case stateCommitted:
		tw.state = stateAborted
		// No further byte leaves: a write blocked on the client fails now,
		// and so does the final flush. HTTP/2 resets the stream at once.
		_ = http.NewResponseController(tw.w).SetWriteDeadline(time.Now())
	default:
		return false
	}
	tw.answered = true
	// Release a handler blocked reading the request body.
	_ = http.NewResponseController(tw.w).SetReadDeadline(time.Now())
	return true
}

// discardLocked drops what the handler held and the fields it had copied
// to the underlying header map, so that the deadline's answer replaces the
// response whole; it returns that map.
func (tw *timeoutWriter) discardLocked() http.Header {
	tw.dropHeldLocked()
	h := tw.w.Header()
	if tw.copied != nil {
		for _, k := range *tw.copied {
			delete(h, k)
		}
		tw.forgetCopiedLocked()
	}
	return h
}

// answerLocked is expireLocked under an adapter's answerer: its whole
// answer if nothing was sent (on HTTP/1 with Connection: close, as the
// 504), its end of the committed response if no write is under way and
// the body allows it, else an abort. The detached ServeHTTP returns once
// the answer is whole, so nothing is flushed here.
func (tw *timeoutWriter) answerLocked() bool {
	cause := context.Cause(tw.owner.ctx())
	switch tw.state {
	case stateOpen:
		h := tw.discardLocked()
		if tw.h1 {
			h["Connection"] = []string{"close"}
		}
		if tw.owner.detached() == nil {
			// ServeHTTP does not return before the late handler (an
			// HTTP/1 call that does not stream): the answer must be
			// complete by itself, so it goes out whole, with its length.
			tw.answerWholeLocked(h, cause)
		} else {
			tw.answer().Answer(tw.w, cause)
		}
		tw.state = stateTimedOut
	case stateCommitted:
		// In place (an HTTP/1 call that does not stream, committing only
		// as it returns) there is no end to send but the handler's own.
		if !tw.sending && tw.owner.detached() != nil && tw.answer().End(tw.w, cause) {
			tw.state = stateTimedOut
			break
		}
		tw.state = stateAborted
		// A write blocked on the client fails now; the stream is reset
		// (the connection closed) when ServeHTTP aborts.
		_ = http.NewResponseController(tw.w).SetWriteDeadline(time.Now())
	default:
		return false
	}
	tw.answered = true
	return true
}

// answerWholeLocked has the answerer write its answer into a buffer and
// sends it with Content-Length, flushed, so that the client has all of it
// while the handler runs on; a handler blocked reading the body is
// released, as by the 504.
func (tw *timeoutWriter) answerWholeLocked(h http.Header, cause error) {
	b := wholeAnswer{h: h}
	tw.answer().Answer(&b, cause)
	if b.code == 0 {
		b.code = http.StatusOK
	}
	h["Content-Length"] = []string{strconv.Itoa(len(b.body))}
	tw.w.WriteHeader(b.code)
	tw.w.Write(b.body) //nolint:errcheck // the client may be gone
	_ = flushUnderlying(tw.w)
	_ = http.NewResponseController(tw.w).SetReadDeadline(time.Now())
}

// wholeAnswer is the writer an answerer writes a whole answer to: the
// response's header map, and its status and body held.
type wholeAnswer struct {
	h    http.Header
	code int
	body []byte
}

func (b *wholeAnswer) Header() http.Header { return b.h }

func (b *wholeAnswer) WriteHeader(code int) {
	if b.code == 0 && code >= 200 {
		b.code = code
	}
}

func (b *wholeAnswer) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	b.body = append(b.body, p...)
	return len(p), nil
}

// finishLocked is the handler's return. completed is false when it
// panicked. expired says the request's time is up (the context ended with
// a timeout) in case no deadline callback ran. It returns the state before.
func (tw *timeoutWriter) finishLocked(completed, expired bool) writerState {
	s := tw.state
	if !completed {
		tw.dropHeldLocked() // net/http sends nothing for a panicking handler
		tw.state = stateDone
		return s
	}
	switch s {
	case stateOpen:
		if expired {
			tw.expireLocked()
			tw.state = stateDone
			return stateTimedOut
		}
		// The handler returned in time: what it held is its response
		// (with no status or body, net/http sends its fields with an
		// implicit 200). The state is done first, so a deadline firing
		// now leaves the writer alone.
		code, body := tw.commitLocked()
		tw.state = stateDone
		_ = tw.sendHeld(code, body)
		tw.copyTrailersLocked()
		tw.recycleHeaderLocked()
	case stateCommitted:
		if expired && tw.answer() != nil {
			// The adapter ends the response in its protocol, as at the
			// deadline, rather than let the late return end it.
			tw.answerLocked()
			s = tw.state
			tw.state = stateDone
			return s
		}
		tw.state = stateDone
		tw.copyTrailersLocked()
		tw.recycleHeaderLocked()
	default:
		tw.state = stateDone
	}
	return s
}

// copyTrailersLocked passes on trailer values the handler set, after it
// committed, in a header map it obtained before: net/http reads trailers
// only when the handler returns.
func (tw *timeoutWriter) copyTrailersLocked() {
	if len(tw.h) == 0 {
		return
	}
	dst := tw.w.Header()
	for k, v := range tw.h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			dst[k] = v
		}
	}
	for _, line := range tw.h["Trailer"] {
		for _, name := range strings.Split(line, ",") {
			k := http.CanonicalHeaderKey(strings.TrimSpace(name))
			if v, ok := tw.h[k]; ok {
				dst[k] = v
			}
		}
	}
}
