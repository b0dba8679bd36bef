package inbound

import (
	"context"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Handler returns next wrapped in the inbound pipeline, for plain
// net/http: the view's Raw is the *http.Request and its Route comes from
// the Framework's RouteFunc (PatternRoute by default, which needs the
// middleware inside the ServeMux, around each registered handler, where
// the request's Pattern is set). "The net/http middleware" in
// docs/guide.md says what the wrapped handler is guaranteed.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return &handler{m: m, next: next}
}

type handler struct {
	m    *Middleware
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor >= 2 && h.m.Timed() {
		serveDetached(w, r, (*admitting)(h), false)
		return
	}
	h.serveHTTP(w, r)
}

// admitting is the handler's own work, as the detached goroutine runs it.
type admitting handler

func (a *admitting) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*handler)(a).serveHTTP(w, r) }

func (h *handler) serveHTTP(w http.ResponseWriter, r *http.Request) {
	c := call{ctx: r.Context(), raw: r, w: w, r: r, next: h.next}
	if err := h.m.dispatch(&c); err != nil {
		h.m.rejectHTTP(w, r, err)
	}
}

// HTTP/2 ends a response's stream (END_STREAM) only when ServeHTTP
// returns. So that a 504 sent at the deadline is a complete response even
// while a handler that ignores its context keeps running, a timed HTTP/2
// request runs the middleware and the handler on a goroutine of their own:
// ServeHTTP returns as soon as the 504 is out, and the handler keeps its
// permit until it really returns. HTTP/1.x needs none of this (the 504
// carries Content-Length and Connection: close), so it keeps the cheaper
// single goroutine.

// detachedWriter is the writer of a detached request. Until ServeHTTP
// returns it passes everything through; after, net/http has finished the
// response, and the controls a late handler can still reach through
// http.ResponseController fail instead of touching it. The timed writer
// stops every write at the deadline, so only those controls need the
// guard.
type detachedWriter struct {
	w http.ResponseWriter
	// wake is held from the start until the work is done or its deadline
	// answered, whichever comes first, and ServeHTTP waits by locking it:
	// a Mutex may be unlocked by another goroutine, and unlike a channel
	// it costs no allocation. woken makes the first signal the only one.
	wake  sync.Mutex
	woken atomic.Bool

	// guard: writes too are refused once ServeHTTP returned (DetachHTTP2,
	// where the framework, not the timed writer, writes last).
	guard bool
	spare http.Header // Header once gone, under guard

	signalled atomic.Bool // the deadline's answer is out
	abort     atomic.Bool // ... and it cut the response: ServeHTTP aborts it

	mu       sync.Mutex
	gone     bool // ServeHTTP has returned
	finished bool // the middleware's work returned

	panicked bool
	panicVal any

	r    *http.Request // the detached work, for Run
	next http.Handler
}

// start readies d for wait, before the work starts.
func (d *detachedWriter) start() { d.wake.Lock() }

// wakeUp lets wait return, once.
func (d *detachedWriter) wakeUp() {
	if d.woken.CompareAndSwap(false, true) {
		d.wake.Unlock()
	}
}

func (d *detachedWriter) Header() http.Header {
	if d.guard {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.gone {
			if d.spare == nil {
				d.spare = make(http.Header)
			}
			return d.spare
		}
	}
	return d.w.Header()
}

func (d *detachedWriter) WriteHeader(code int) {
	if d.guard {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.gone {
			return
		}
	}
	d.w.WriteHeader(code)
}

func (d *detachedWriter) Write(p []byte) (int, error) {
	if d.guard {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.gone {
			return 0, http.ErrHandlerTimeout
		}
	}
	return d.w.Write(p)
}

// FlushError flushes the response while it is still net/http's.
func (d *detachedWriter) FlushError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gone {
		return http.ErrHandlerTimeout
	}
	return flushUnderlying(d.w)
}

// SetReadDeadline is http.ResponseController's, while the response lasts.
func (d *detachedWriter) SetReadDeadline(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gone {
		return http.ErrHandlerTimeout
	}
	return http.NewResponseController(d.w).SetReadDeadline(t)
}

// SetWriteDeadline is http.ResponseController's, while the response lasts.
func (d *detachedWriter) SetWriteDeadline(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gone {
		return http.ErrHandlerTimeout
	}
	return http.NewResponseController(d.w).SetWriteDeadline(t)
}

// EnableFullDuplex is http.ResponseController's, while the response lasts.
func (d *detachedWriter) EnableFullDuplex() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gone {
		return http.ErrHandlerTimeout
	}
	return http.NewResponseController(d.w).EnableFullDuplex()
}

// signalTimedOut lets ServeHTTP return: the 504 (or an adapter's answer)
// has been written, or, with abort, the response was cut and the handler
// no longer writes to it, and ServeHTTP aborts it. Called with a timed
// writer's mutex held; two timed writers over one detached request signal
// it once.
func (d *detachedWriter) signalTimedOut(abort bool) {
	if d.signalled.CompareAndSwap(false, true) {
		d.abort.Store(abort)
		d.wakeUp()
	}
}

// findDetached returns the detached writer w writes to, directly or
// through a framework's writer (gin's and echo's unwrap), or nil.
func findDetached(w http.ResponseWriter) *detachedWriter {
	for range 4 {
		if d, ok := w.(*detachedWriter); ok {
			return d
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

// DetachHTTP2 returns h, a framework's router (gin, echo) whose adapter
// uses Serve, so that each HTTP/2 request runs on a goroutine of its own:
// ServeHTTP then returns once the 504 sent at the deadline is out, and
// HTTP/2 ends its stream cleanly while the late handler runs on, as
// Handler does by itself. Without it, under Serve the stream is reset
// after the complete 504 (HTTP/2 ends a stream only when ServeHTTP
// returns, and the framework owns that call). Set it as the server's
// handler: srv.Handler = inbound.DetachHTTP2(router). HTTP/1 requests
// pass through; an HTTP/2 request costs a goroutine and a few
// allocations.
func DetachHTTP2(h http.Handler) http.Handler { return detach{h} }

type detach struct{ next http.Handler }

func (x detach) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor < 2 {
		x.next.ServeHTTP(w, r)
		return
	}
	serveDetached(w, r, x.next, true)
}

// serveDetached runs the request on its own goroutine and returns when it
// is done or its 504 is out. A panic of the middleware or the handler is
// re-raised here while ServeHTTP is still waiting (so net/http and outer
// middlewares see it, http.ErrAbortHandler included); after, it is logged
// the way net/http logs a handler's panic.
func serveDetached(w http.ResponseWriter, r *http.Request, next http.Handler, guard bool) {
	d := &detachedWriter{w: w, guard: guard, r: r, next: next}
	d.start()
	Go(r.Context(), d)
	d.wait()
}

// wait returns when the detached work is done or its deadline answered.
// It re-raises the work's panic, and aborts a response the deadline cut.
func (d *detachedWriter) wait() {
	d.wake.Lock()
	d.mu.Lock()
	d.gone = true
	if !d.finished {
		d.mu.Unlock()
		if d.abort.Load() {
			panic(http.ErrAbortHandler) // the handler runs on; the client sees a cut response
		}
		return // the handler runs on, past its answer
	}
	d.mu.Unlock()
	if d.panicked {
		panic(d.panicVal)
	}
}

// Run is the detached work, on its own goroutine.
func (d *detachedWriter) Run() {
	r := d.r
	completed := false
	defer func() {
		var v any
		if !completed {
			v = recover()
		}
		d.end(r, completed, v, "its 504")
	}()
	d.next.ServeHTTP(d, r)
	completed = true
}

// end records the end of the detached work, on its goroutine: a panic
// (completed false, v recovered) goes to ServeHTTP while it waits, and is
// logged, after what (the answer it got), once ServeHTTP has returned.
func (d *detachedWriter) end(r *http.Request, completed bool, v any, after string) {
	d.mu.Lock()
	gone := d.gone
	d.panicked, d.panicVal = !completed, v
	d.finished = true
	d.mu.Unlock()
	d.wakeUp()
	if gone && !completed && v != http.ErrAbortHandler {
		LogPanic(r, "http: panic serving %v after %s: %v\n%s", r.RemoteAddr, after, v, debug.Stack())
	}
}

// answering is a request under ServeAnswering: its detached writer, the
// call and its deadline engine, in one allocation.
type answering struct {
	d   detachedWriter
	t   timedRequest
	c   call
	m   *Middleware
	err error // dispatch's, read once finished
}

// ServeAnswering is Serve for an adapter that answers a timed request's
// deadline itself, in its own protocol (connect: a DeadlineExceeded
// error in the caller's protocol, gRPC's trailers), while the handler
// runs on: answer says how, and sees the body as it is sent. deadline is
// the caller's own, read by the adapter from the request (gRPC's
// grpc-timeout, Connect-Timeout-Ms), zero for none: it bounds the wait in
// the queue and times the handler like Options.Timeout, whichever ends
// first.
//
// A streaming call (answer.Streams), and every call over HTTP/2, runs the
// middleware and the handler on a goroutine of its own (see Go), so that
// ServeAnswering returns once the answer is out, and net/http ends the
// response, while the handler keeps its permit until it returns. It then
// returns nil and the adapter must not touch w or r again. A call over
// HTTP/1 that does not stream runs on the caller's goroutine, as under
// Serve: its answer goes out whole (Content-Length, Connection: close)
// while the handler runs on, and ServeAnswering returns nil when the
// handler does. A response the handler had committed that cannot be ended
// (a write was under way, or answer.End refused) is aborted:
// ServeAnswering panics with http.ErrAbortHandler. Otherwise it behaves as
// Serve: a rejection is returned for the adapter to render on w, and the
// handler's panics propagate; one after a detached call's answer is
// logged. An untimed request (no timeout, no pipeline, zero deadline) is
// served as by Serve, on the caller's goroutine.
func (m *Middleware) ServeAnswering(w http.ResponseWriter, r *http.Request, raw any, next Continue, deadline time.Time, answer DeadlineAnswer) error {
	if next == nil || answer == nil {
		return resilience.ErrNilCallback
	}
	if !m.Timed() && deadline.IsZero() {
		return m.Serve(w, r, raw, next)
	}
	if raw == nil {
		raw = r
	}
	if r.ProtoMajor < 2 && !answer.Streams() {
		return m.serveAnsweringHere(w, r, raw, next, deadline, answer)
	}
	a := &answering{m: m}
	a.d.w = w
	a.d.start()
	a.c = call{ctx: r.Context(), raw: raw, w: &a.d, r: r, cont: next, deadline: deadline, ans: answer, timed: &a.t, detached: &a.d}
	defer m.pipelineDeadline(&a.c)()
	Go(r.Context(), a)
	a.d.wait()
	a.d.mu.Lock()
	defer a.d.mu.Unlock()
	if a.d.finished {
		return a.err
	}
	return nil // answered at the deadline
}

// serveAnsweringHere is ServeAnswering for a call that does not stream,
// over HTTP/1: on the caller's goroutine, like the net/http middleware's
// HTTP/1 requests.
func (m *Middleware) serveAnsweringHere(w http.ResponseWriter, r *http.Request, raw any, next Continue, deadline time.Time, answer DeadlineAnswer) error {
	c := call{ctx: r.Context(), raw: raw, w: w, r: r, cont: next, deadline: deadline, ans: answer}
	defer m.pipelineDeadline(&c)()
	return m.dispatch(&c)
}

// pipelineDeadline puts the caller's deadline of c on its context under a
// custom pipeline, whose strategies see it there (the engine reads it
// there too), and returns what releases that context.
func (m *Middleware) pipelineDeadline(c *call) context.CancelFunc {
	if m.pipeline == nil || c.deadline.IsZero() {
		return func() {}
	}
	var cancel context.CancelFunc
	c.ctx, cancel = context.WithDeadline(c.ctx, c.deadline)
	c.deadline = time.Time{}
	return cancel
}

// Run is the answering request's work, on its own goroutine.
func (a *answering) Run() {
	completed := false
	defer func() {
		var v any
		if !completed {
			v = recover()
		}
		a.d.end(a.c.r, completed, v, "its deadline was answered")
	}()
	a.err = a.m.dispatch(&a.c)
	completed = true
}
