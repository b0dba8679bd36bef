package inbound

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
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
	w        http.ResponseWriter
	timedOut chan struct{} // closed once the 504 is out: ServeHTTP may return
	done     chan struct{} // closed when the middleware's work returns

	// guard: writes too are refused once ServeHTTP returned (DetachHTTP2,
	// where the framework, not the timed writer, writes last).
	guard bool
	spare http.Header // Header once gone, under guard

	signalled atomic.Bool // timedOut is closed

	mu   sync.Mutex
	gone bool // ServeHTTP has returned

	panicked bool
	panicVal any
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

// signalTimedOut lets ServeHTTP return: the 504 has been written and
// flushed. Called with a timed writer's mutex held; two timed writers
// over one detached request signal it once.
func (d *detachedWriter) signalTimedOut() {
	if d.signalled.CompareAndSwap(false, true) {
		close(d.timedOut)
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
	d := &detachedWriter{w: w, guard: guard, timedOut: make(chan struct{}), done: make(chan struct{})}
	go runDetached(d, r, next)
	select {
	case <-d.done:
	case <-d.timedOut:
	}
	d.mu.Lock()
	d.gone = true
	select {
	case <-d.done:
	default:
		d.mu.Unlock()
		return // the handler runs on, past its 504
	}
	d.mu.Unlock()
	if d.panicked {
		panic(d.panicVal)
	}
}

func runDetached(d *detachedWriter, r *http.Request, next http.Handler) {
	completed := false
	defer func() {
		var v any
		if !completed {
			v = recover()
		}
		d.mu.Lock()
		gone := d.gone
		d.panicked, d.panicVal = !completed, v
		close(d.done)
		d.mu.Unlock()
		if gone && !completed && v != http.ErrAbortHandler {
			LogPanic(r, "http: panic serving %v after its 504: %v", r.RemoteAddr, v)
		}
	}()
	next.ServeHTTP(d, r)
	completed = true
}
