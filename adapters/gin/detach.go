package resiliencegin

import (
	"bufio"
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"reflect"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/gin-gonic/gin"

	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// HTTP/2 ends a response's stream only when the server's ServeHTTP
// returns, and gin's engine returns only when its chain does, then puts
// the *gin.Context back in its pool. So that a 504 at the deadline ends
// its stream while a late handler runs on, a timed HTTP/2 request runs
// the rest of the chain on a worker (adapt.DetachHTTP2), for cp, a copy
// of c that the late handler may keep once gin has recycled c. The
// middleware waits for the first of the chain's return and the 504:
//
//   - the chain returned: cp's state is copied back into c, and gin goes
//     on as if the chain had run on c;
//   - the 504 went out (through the detached writer, onto gin's writer):
//     c is aborted and its writer closed, as after a 504 on HTTP/1, and
//     the worker never touches c nor gin's writer again.
//
// What the copy shares with c, field by field of gin's Context (checked
// against its reset and Copy):
//
//   - per-request values, never written in place once set, so safe to
//     share: Request, handlers (the route's chain), index, fullPath,
//     engine, Accepted, queryCache, formCache, sameSite;
//   - reused by gin for the context's next request, so copied: Params
//     (routing writes into a pooled backing array), Errors (appended to
//     in a reused array), Keys (a late Set must not race an outer
//     middleware reading c.Keys after the 504), and three fields reflect
//     cannot set alone, set through their addresses: params and
//     skippedNodes (the routing buffers, reached by a late
//     engine.HandleContext) get buffers of their own, and writermem (gin's
//     writer, written only by the engine and HandleContext) writes
//     through the detached writer instead of the connection's;
//   - Writer: the copy's is an h2Writer over the detached writer;
//   - mu, the Keys mutex: copied unlocked (see newDetachedRun).
//
// The copy back keeps c's own params, skippedNodes and writermem: the
// latter is gin's writer as the response went out.

// detachable reports that gin's Context has the private fields the copy
// sets (checked once against the gin in use). If a gin release renamed
// them, timed HTTP/2 requests run as HTTP/1 ones do: the 504 whole, then
// a stream reset, logged once.
var detachable bool

// The indexes of the private fields of gin.Context set by address, and of
// the http.ResponseWriter embedded in writermem.
var fieldWritermem, fieldParams, fieldSkipped, fieldWriterOf int

func init() {
	t := reflect.TypeFor[gin.Context]()
	wm, ok1 := t.FieldByName("writermem")
	p, ok2 := t.FieldByName("params")
	sk, ok3 := t.FieldByName("skippedNodes")
	if !ok1 || !ok2 || !ok3 || len(wm.Index) != 1 || len(p.Index) != 1 || len(sk.Index) != 1 {
		return
	}
	if wm.Type.Kind() != reflect.Struct || !reflect.PointerTo(wm.Type).Implements(reflect.TypeFor[gin.ResponseWriter]()) {
		return
	}
	if p.Type != reflect.TypeFor[*gin.Params]() || sk.Type.Kind() != reflect.Pointer || sk.Type.Elem().Kind() != reflect.Slice {
		return
	}
	rw, ok := wm.Type.FieldByName("ResponseWriter")
	if !ok || len(rw.Index) != 1 || rw.Type != reflect.TypeFor[http.ResponseWriter]() {
		return
	}
	fieldWritermem, fieldParams, fieldSkipped, fieldWriterOf = wm.Index[0], p.Index[0], sk.Index[0], rw.Index[0]
	detachable = true
}

// field returns c's field i, settable although gin does not export it.
func field(c *gin.Context, i int) reflect.Value {
	f := reflect.ValueOf(c).Elem().Field(i)
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// detachedRun is a timed HTTP/2 request's copy of its context and the
// work its worker runs on it, in one allocation.
type detachedRun struct {
	m      *Middleware
	cp     gin.Context
	w      h2Writer   // cp.Writer
	params gin.Params // *cp.params

	// returned is set by the worker once the chain is done with cp
	// (returned or panicked); answered, written before it, says whether
	// the 504 went out first.
	returned atomic.Bool
	answered bool
}

// serveDetached is Handler for a timed HTTP/2 request: the timed path
// (serveTimed) runs on a worker for a copy of c, and Handler returns at
// the first of its return and the 504.
func (m *Middleware) serveDetached(c *gin.Context) {
	orig, req := c.Writer, c.Request
	x := newDetachedRun(m, c)
	completed := false
	defer func() {
		if !completed { // a panic before the deadline, raised here again
			x.settle(c, orig, req, false)
		}
	}()
	adapt.DetachHTTP2(x).ServeHTTP(orig, req)
	completed = true
	x.settle(c, orig, req, true)
}

// newDetachedRun copies c for the worker, on the request's goroutine.
func newDetachedRun(m *Middleware, c *gin.Context) *detachedRun {
	x := &detachedRun{m: m}
	cp := &x.cp
	// The whole struct, through reflect: gin offers no copy that keeps the
	// chain and its index (Copy drops them), and an assignment would copy
	// the Keys mutex, which vet refuses. The mutex is unlocked here: this
	// is the request's goroutine, between two handlers of its chain.
	reflect.ValueOf(cp).Elem().Set(reflect.ValueOf(c).Elem())
	cp.Keys = maps.Clone(c.Keys)
	cp.Errors = slices.Clone(c.Errors)
	// Routing buffers of the copy's own, of gin's sizes (routing reslices
	// them up to their capacity): cp.Params copied into x.params.
	pooled := field(c, fieldParams).Interface().(*gin.Params)
	params := make(gin.Params, len(c.Params), max(cap(*pooled), len(c.Params)))
	copy(params, c.Params)
	cp.Params, x.params = params, params[:0]
	field(cp, fieldParams).Set(reflect.ValueOf(&x.params))
	skipped := field(c, fieldSkipped)
	own := reflect.New(skipped.Type().Elem())
	own.Elem().Set(reflect.MakeSlice(skipped.Type().Elem(), 0, skipped.Elem().Cap()))
	field(cp, fieldSkipped).Set(own)
	// c.Writer is read here, before the worker starts.
	x.w.status, x.w.size = c.Writer.Status(), c.Writer.Size()
	return x
}

// ServeHTTP is the worker's: the timed path for cp, whose writer writes
// through w, the detached writer.
func (x *detachedRun) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cp := &x.cp
	defer func() {
		x.answered = sealed(cp.Writer)
		x.returned.Store(true)
	}()
	x.w.w, x.w.ctx = w, r.Context()
	// gin's writer in the copy writes through w too (only the engine's
	// routing, by a HandleContext, reaches it).
	field(cp, fieldWritermem).Field(fieldWriterOf).Set(reflect.ValueOf(&x.w.w).Elem())
	cp.Writer = &x.w
	x.m.serveTimed(cp)
}

// sealed reports whether w is the closed writer finish leaves after a 504.
func sealed(w gin.ResponseWriter) bool {
	rw, ok := w.(*responseWriter)
	return ok && rw.sealed
}

// settle runs on the request's goroutine once the detached ServeHTTP
// returned (completed) or raised the chain's panic. If the chain returned
// without a 504 (or panicked), cp is copied back into c; otherwise the
// 504 is out, the worker may run on and keeps cp, and c is aborted, its
// writer closed. Either way c's writer and request are the ones it had
// before the middleware.
func (x *detachedRun) settle(c *gin.Context, orig gin.ResponseWriter, req *http.Request, completed bool) {
	if !x.returned.Load() || x.answered {
		c.Abort() // the chain is the worker's: gin must not run it on c
		c.Writer = &responseWriter{orig: orig, sealed: true}
		c.Request = req
		return
	}
	cp := &x.cp
	for _, i := range [...]int{fieldWritermem, fieldParams, fieldSkipped} {
		field(cp, i).Set(field(c, i)) // c's own, kept
	}
	// The mutex is unlocked: the worker is done with cp.
	reflect.ValueOf(c).Elem().Set(reflect.ValueOf(cp).Elem())
	c.Writer, c.Request = orig, req
	if !completed {
		return // a panic: gin's Recovery, if any, answers on gin's writer
	}
	passPending(orig, x.w.Written(), x.w.status) // as finish does, from the copy's writer
}

// h2Writer is the copy's c.Writer: gin's ResponseWriter semantics (a
// status held until the first write, Written, Size), counted here, over
// the detached writer w. It never reaches gin's writer but through w,
// which drops everything once the detached ServeHTTP has returned.
type h2Writer struct {
	w      http.ResponseWriter
	ctx    context.Context // the request's, for CloseNotify
	status int
	size   int
}

func (w *h2Writer) Header() http.Header { return w.w.Header() }

func (w *h2Writer) WriteHeader(code int) {
	if code > 0 && !w.Written() {
		w.status = code
	}
}

func (w *h2Writer) WriteHeaderNow() {
	if !w.Written() {
		w.size = 0
		w.w.WriteHeader(w.status)
	}
}

func (w *h2Writer) Write(p []byte) (int, error) {
	w.WriteHeaderNow()
	n, err := w.w.Write(p)
	w.size += n
	return n, err
}

func (w *h2Writer) WriteString(s string) (int, error) {
	w.WriteHeaderNow()
	n, err := io.WriteString(w.w, s)
	w.size += n
	return n, err
}

func (w *h2Writer) Status() int   { return w.status }
func (w *h2Writer) Size() int     { return w.size }
func (w *h2Writer) Written() bool { return w.size != noWritten }

// Hijack fails: an HTTP/2 stream cannot be hijacked.
func (w *h2Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, http.ErrNotSupported
}

func (w *h2Writer) Flush() {
	w.WriteHeaderNow()
	_ = http.NewResponseController(w.w).Flush()
}

// CloseNotify reports the end of the request's context: the client gone,
// or the stream over.
func (w *h2Writer) CloseNotify() <-chan bool {
	ch := make(chan bool, 1)
	context.AfterFunc(w.ctx, func() { ch <- true })
	return ch
}

// Pusher is nil: no server push from a detached request.
func (w *h2Writer) Pusher() http.Pusher { return nil }

// Unwrap lets the inbound middleware find the detached writer, and
// http.ResponseController reach through it.
func (w *h2Writer) Unwrap() http.ResponseWriter { return w.w }
