package inbound

import (
	"context"
	"github.com/ylcnfrht/resilience/core/internal/worker"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Handler returns next wrapped in the inbound pipeline, for plain
// net/http: the view's Raw is the *http.Request and its Route comes from
// the adapter's adapt.RouteFunc (adapt.PatternRoute by default, which needs the
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
	if r.ProtoMajor >= 2 && h.m.timed() {
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
	w    http.ResponseWriter
	hand worker.Handoff // the work on its worker, and ServeHTTP waiting for it

	// guard: writes too are refused once ServeHTTP returned (DetachHTTP2,
	// where the framework, not the timed writer, writes last).
	guard bool
	spare http.Header // Header once gone, under guard

	abort atomic.Bool // the deadline's answer cut the response: ServeHTTP aborts it

	mu   sync.Mutex
	gone bool // ServeHTTP has returned

	r    *http.Request // the detached work, for Run
	next http.Handler
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
	if d.hand.Claim() {
		d.abort.Store(abort)
		d.hand.Wake()
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

// detachHTTP2 is adapt.DetachHTTP2, documented there: a timed HTTP/2
// request under Serve runs detached, so its 504 ends the stream cleanly.
func detachHTTP2(h http.Handler) http.Handler { return detach{h} }

// warnUndetached logs, once, that an HTTP/2 request reached Serve with
// its router not detached: its 504 would end in a stream reset, a
// mistake nothing else would show.
func (m *Middleware) warnUndetached(r *http.Request) {
	if m.undetached.CompareAndSwap(false, true) {
		worker.LogPanic(r, "resilience: an HTTP/2 request reached a timed middleware whose router is not served through its adapter's Router (adapt.DetachHTTP2): a 504 at its deadline ends in a stream reset. Set the server's Handler to the adapter's Router(router).")
	}
}

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
	d.hand.Start(r.Context(), (*detachedWork)(d))
	d.wait()
}

// wait returns when the detached work is done or its deadline answered,
// and reports which. It re-raises the work's panic, and aborts a response
// the deadline cut.
func (d *detachedWriter) wait() (answered bool) {
	defer func() {
		d.mu.Lock()
		d.gone = true
		d.mu.Unlock()
	}()
	if answered = d.hand.Wait(); answered && d.abort.Load() {
		panic(http.ErrAbortHandler) // the handler runs on; the client sees a cut response
	}
	return answered
}

// detachedWork is a detached request's middleware and handler, as its
// worker runs them.
type detachedWork detachedWriter

func (x *detachedWork) Run() { x.next.ServeHTTP((*detachedWriter)(x), x.r) }

// LatePanic logs a panic after the 504 the way net/http logs a handler's.
func (x *detachedWork) LatePanic(v any) { logLatePanic(x.r, v, "its 504") }

// logLatePanic logs v, a panic of r's handler after its answer (after
// says which), as net/http logs a handler's panic; http.ErrAbortHandler
// is not logged, as net/http does not.
func logLatePanic(r *http.Request, v any, after string) {
	if v != http.ErrAbortHandler {
		worker.LogPanic(r, "http: panic serving %v after %s: %v\n%s", r.RemoteAddr, after, v, debug.Stack())
	}
}

// answering is a request under ServeAnswering: its detached writer, the
// call and its deadline engine, in one allocation.
type answering struct {
	d   detachedWriter // its worker.Handoff runs the answering
	t   answeredRequest
	c   call
	m   *Middleware
	err error // dispatch's, read once finished
}

// serveAnswering is adapt.Kit.ServeAnswering, documented there: a
// stream, or any call over HTTP/2, runs detached (answering.Run); a call
// that does not stream, over HTTP/1, runs here (serveAnsweringHere).
func (m *Middleware) serveAnswering(w http.ResponseWriter, r *http.Request, raw any, next continueFunc, deadline time.Time, answer deadlineAnswer) error {
	if next == nil || answer == nil {
		return resilience.ErrNilCallback
	}
	if !m.timed() && deadline.IsZero() {
		return m.serve(w, r, raw, next)
	}
	if raw == nil {
		raw = r
	}
	if r.ProtoMajor < 2 && !answer.Streams() {
		return m.serveAnsweringHere(w, r, raw, next, deadline, answer)
	}
	a := &answering{m: m}
	a.d.w = w
	a.c = call{ctx: r.Context(), raw: raw, w: &a.d, r: r, cont: next, deadline: deadline, ans: answer, timed: &a.t}
	defer m.pipelineDeadline(&a.c)()
	a.d.hand.Start(r.Context(), a)
	if a.d.wait() {
		return nil // answered at the deadline
	}
	return a.err
}

// serveAnsweringHere is ServeAnswering for a call that does not stream,
// over HTTP/1: on the caller's goroutine, like the net/http middleware's
// HTTP/1 requests.
func (m *Middleware) serveAnsweringHere(w http.ResponseWriter, r *http.Request, raw any, next continueFunc, deadline time.Time, answer deadlineAnswer) error {
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
func (a *answering) Run() { a.err = a.m.dispatch(&a.c) }

// LatePanic logs a panic after the call's answer.
func (a *answering) LatePanic(v any) { logLatePanic(a.c.r, v, "its deadline was answered") }
