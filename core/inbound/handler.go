package inbound

import (
	"net/http"
	"sync"
	"time"
)

// Handler returns next wrapped in the inbound pipeline, for plain
// net/http: the view's Raw is the *http.Request and its Route comes from
// the Framework's RouteFunc (PatternRoute by default, which needs the
// middleware inside the ServeMux, around each registered handler, where
// the request's Pattern is set). See the package documentation for what
// the wrapped handler guarantees.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return &handler{m: m, next: next}
}

type handler struct {
	m    *Middleware
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor >= 2 && h.m.Timed() {
		h.serveDetached(w, r)
		return
	}
	h.serveHTTP(w, r)
}

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

	mu   sync.Mutex
	gone bool // ServeHTTP has returned

	panicked bool
	panicVal any
}

func (d *detachedWriter) Header() http.Header         { return d.w.Header() }
func (d *detachedWriter) WriteHeader(code int)        { d.w.WriteHeader(code) }
func (d *detachedWriter) Write(p []byte) (int, error) { return d.w.Write(p) }

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
// flushed. Called with the timed writer's mutex held, once.
func (d *detachedWriter) signalTimedOut() { close(d.timedOut) }

// serveDetached runs the request on its own goroutine and returns when it
// is done or its 504 is out. A panic of the middleware or the handler is
// re-raised here while ServeHTTP is still waiting (so net/http and outer
// middlewares see it, http.ErrAbortHandler included); after, it is logged
// the way net/http logs a handler's panic.
func (h *handler) serveDetached(w http.ResponseWriter, r *http.Request) {
	d := &detachedWriter{w: w, timedOut: make(chan struct{}), done: make(chan struct{})}
	go h.runDetached(d, r)
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

func (h *handler) runDetached(d *detachedWriter, r *http.Request) {
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
	h.serveHTTP(d, r)
	completed = true
}
