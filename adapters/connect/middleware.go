package resilienceconnect

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime/debug"
	"sync"

	"connectrpc.com/connect"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Middleware is the inbound pipeline in front of connect handlers. Wrap
// each handler (or the mux holding them) with Handler. A Middleware is
// safe for concurrent use; every handler it wraps shares its limits. Build
// it with New: the zero value is not usable. A rejected, timed-out or
// panicking call leaves nothing behind (permit and queue place returned).
type Middleware struct {
	in     *inbound.Middleware
	errw   *connect.ErrorWriter
	render func(error, inbound.Response) inbound.Response // Options.Render
	rej    rejections
	ends   streamEnds // rej.timeout as the end of a committed stream
	timed  bool       // inbound's Timed: a deadline can answer for every call
	// recycle: a call answered in time can be reused. Not under a custom
	// pipeline, whose context (the handler's) carries the view, and with
	// it the Call, beyond the handler's return.
	recycle bool

	specs sync.Map // procedure → connect.Spec, filled by HandlerOption
}

// New validates opts and returns the middleware, or a
// *resilience.ConfigError naming the first invalid field (errors.Is
// resilience.ErrInvalidOptions). Options.Render restyles rejections sent
// over the Connect protocol's unary HTTP mapping only (its default is
// Connect's own error response); gRPC, gRPC-Web and Connect streaming keep
// their protocols' error format.
func New(opts inbound.Options) (*Middleware, error) {
	render := opts.Render
	opts.Render = nil // inbound's JSON is never sent; its headers are read unrestyled
	in, err := inbound.NewFor(framework, opts)
	if err != nil {
		return nil, err
	}
	// Timed: a timeout, or a custom pipeline that may hold a timeout
	// strategy of its own.
	m := &Middleware{in: in, errw: connect.NewErrorWriter(), render: render, rej: newRejections(retryAdvice(opts.RetryAfter)), timed: in.Timed(),
		recycle: opts.Pipeline == nil}
	m.ends = newStreamEnds(m.errw, m.rej.timeout)
	return m, nil
}

// framework tells inbound how to read a call: the view comes from the
// Call (Request.Raw), the route is Call.route, and the RateLimit fields
// go on the handler's response header.
var framework = inbound.Framework{
	Route: func(raw any) string { return raw.(*Call).route() },
	View: func(raw any, v *inbound.Request) {
		r := raw.(*Call).Request
		v.Method, v.Path, v.RemoteAddr, v.Header = r.Method, r.URL.Path, r.RemoteAddr, r.Header
	},
	// Only Execute (timed calls) sets fields this way, before the handler
	// runs: on the handler's private header map.
	SetHeader: func(raw any, name, value string) { raw.(*Call).c.tw.Header().Set(name, value) },
}

// Inbound returns the underlying inbound middleware: its Limiter to
// change the limit at run time, its RateLimiter and AdaptiveLimiter, and
// Drain, to call before the server's Shutdown (inbound.Middleware.Drain says what it does).
func (m *Middleware) Inbound() *inbound.Middleware { return m.in }

// Stats returns the middleware's current load: Inbound().Stats(), whose
// Late and LateTotal count the handlers still running after their
// deadline was answered.
func (m *Middleware) Stats() inbound.Stats { return m.in.Stats() }

// StatsHandler serves Stats as JSON, for a debug route outside the
// middleware (the examples mount it at /debug/limits).
func (m *Middleware) StatsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(m.Stats())
	})
}

// Handler wraps next, a connect handler (or a mux of them), in the inbound
// pipeline. Mount the result where next would be mounted:
//
//	path, h := greetv1connect.NewGreetServiceHandler(svc, mw.HandlerOption())
//	mux.Handle(path, mw.Handler(h))
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return &handler{m: m, next: next}
}

type handler struct {
	m    *Middleware
	next http.Handler
}

// call is one RPC with a deadline: the Call priority and key functions
// read, the handler's writer, and the state shared by ServeHTTP and the
// goroutine running the handler.
type call struct {
	m    *Middleware
	next http.Handler
	w    http.ResponseWriter
	r    *http.Request
	info Call // Request.Raw

	ran bool // the handler was admitted (set before its event is sent)

	tw  timedWriter
	ctx context.Context // the handler's context, set before its admission event
	// events carries, from the call's goroutine, the admission (when the
	// handler is admitted) and then the end of the call (always).
	events chan struct{}
	err    error // Execute's, read after the end event
	// The request's fields the deadline's answer needs, read before the
	// handler runs: connect's handler changes the request's header map.
	contentType, protocolVersion string
	panicked                     bool // the handler panicked before its deadline
	answerPanic                  bool // ... and Options.AnswerPanics answers it (c.err)
	panicVal                     any

	runFn func(ctx context.Context) error // runHandler, bound once per call value
}

// calls recycles the calls answered in time: nothing holds one then (the
// call's goroutine sent its last event, and Execute has returned).
var calls = sync.Pool{New: func() any {
	c := &call{events: make(chan struct{}, 2)}
	c.runFn = c.runHandler
	return c
}}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	wi := classify(r)
	ctx := r.Context()
	timed := m.timed
	switch d, err := callerTimeout(wi, r.Header); {
	case err == errNoTimeout:
	case err != nil:
		m.writeRejection(w, r, err, err.(*connect.Error))
		return
	case d <= 0:
		// Already expired: answered at once, without queueing.
		m.writeRejection(w, r, context.DeadlineExceeded, m.rej.expired)
		return
	default:
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
		timed = true
	}
	if !timed {
		// No deadline: the handler runs here, on the request's goroutine,
		// with the real writer, through Serve; only the Call is allocated.
		info := &Call{Procedure: r.URL.Path, Header: r.Header, Request: r, wire: wi, m: m, next: h.next}
		if err := m.in.Serve(w, r, info, continueCall); err != nil {
			m.reject(w, r, err)
		}
		return
	}
	c := calls.Get().(*call)
	c.m, c.next, c.w, c.r = m, h.next, w, r
	c.info = Call{Procedure: r.URL.Path, Header: r.Header, Request: r, wire: wi, m: m, c: c}
	if c.serveTimed(ctx) && m.recycle {
		// The handler's header map was copied to the real one: it is
		// emptied for the next call.
		h := c.tw.h
		clear(h)
		*c = call{events: c.events, runFn: c.runFn}
		c.tw.h = h
		calls.Put(c)
	}
}

// continueCall runs the handler of an untimed call Serve admitted.
func continueCall(w http.ResponseWriter, r *http.Request, raw any) {
	raw.(*Call).next.ServeHTTP(w, r)
}

// reject answers a call that was not admitted. A call whose client left
// while it queued gets nothing: the stream is aborted, since net/http
// would otherwise end it with an empty 200 of its own.
func (m *Middleware) reject(w http.ResponseWriter, r *http.Request, err error) {
	e := m.rej.rejection(m.in, err)
	if e == nil {
		panic(http.ErrAbortHandler)
	}
	m.writeRejection(w, r, err, e)
}

// serveTimed runs the call on a goroutine of its own and waits for it or
// for its deadline, whichever comes first. It reports whether the call
// ended before it returned (answered in time, or rejected): then nothing
// holds c any more.
func (c *call) serveTimed(ctx context.Context) bool {
	c.tw = timedWriter{w: c.w, rc: *http.NewResponseController(c.w), wire: c.info.wire, ends: &c.m.ends, in: c.m.in, h: c.tw.h}
	c.contentType = c.r.Header.Get("Content-Type")
	c.protocolVersion = c.r.Header.Get("Connect-Protocol-Version")
	go c.run(ctx)
	<-c.events
	ended := !c.ran // a call never admitted sends only its end
	if !ended {
		select {
		case <-c.events:
			ended = true
		case <-c.ctx.Done():
		}
	}
	// The deadline may have passed whichever fired first: a handler that
	// returned after it left its response to be answered here.
	if c.ran && errors.Is(c.ctx.Err(), context.DeadlineExceeded) && c.expire() {
		return false
	}
	// In time, or the client left (the handler sees its context end).
	if !ended {
		<-c.events
	}
	if c.panicked {
		panic(c.panicVal) // on the request's goroutine, as without the middleware
	}
	if c.tw.gone {
		// The client left and the handler wrote nothing: no empty 200.
		panic(http.ErrAbortHandler)
	}
	if !c.ran || c.answerPanic {
		if !c.ran {
			// The rate limit's fields for an admitted decision went to
			// the handler's private header; a capacity rejection sends
			// them too, as the HTTP adapters' 503s do.
			copyHeader(c.w.Header(), c.tw.h)
		}
		c.m.reject(c.w, c.r, c.err)
	}
	return true
}

// expire answers the deadline. It reports false when the handler had
// returned before it (nothing was done).
func (c *call) expire() bool {
	switch c.tw.expire(c.answerTimeout) {
	case expiryNone:
		return false
	case expiryAbort:
		// Neither a status nor the protocol's end can be sent any more:
		// net/http resets the stream (or closes the connection) on this
		// value, so the client sees an incomplete response, never a
		// whole one.
		panic(http.ErrAbortHandler)
	}
	return true
}

// answerTimeout writes DeadlineExceeded on the untouched real writer.
func (c *call) answerTimeout(w http.ResponseWriter) {
	if c.r.ProtoMajor == 1 {
		// The late handler may still read the body: the connection is not
		// reused.
		w.Header().Set("Connection", "close")
	}
	// The error writer reads the method and these fields to tell the
	// protocol; the handler may be changing the request's own map.
	r := &http.Request{Method: c.r.Method, URL: c.r.URL, Header: http.Header{
		"Content-Type": {c.contentType}, "Connect-Protocol-Version": {c.protocolVersion}}}
	c.m.writeError(w, r, context.Cause(c.ctx), c.m.rej.timeout)
}

// run is the timed call's goroutine: admission, then the handler.
func (c *call) run(ctx context.Context) {
	defer func() { c.events <- struct{}{} }()
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if !c.ran {
			c.panicked, c.panicVal = true, p // from a priority or key function
			return
		}
		if c.tw.finishPanic() {
			c.panicked, c.panicVal = true, p
			return
		}
		if p != http.ErrAbortHandler {
			c.logLatePanic(p)
		}
	}()
	c.err = c.m.in.Execute(ctx, &c.info, c.runFn)
	var pe *inbound.PanicError
	if c.ran && errors.As(c.err, &pe) { // Options.AnswerPanics
		switch {
		case !c.tw.finishPanic(): // past the deadline: answered DeadlineExceeded
		case c.tw.committed:
			c.panicked, c.panicVal = true, pe.Value // too late for an error
		default:
			c.answerPanic = true
		}
	}
}

// runHandler is Execute's callback on a timed call.
func (c *call) runHandler(ctx context.Context) error {
	c.ran = true
	c.ctx = ctx
	c.tw.ctx = ctx
	c.events <- struct{}{}
	c.next.ServeHTTP(&c.tw, c.r.WithContext(ctx))
	if c.tw.finish() {
		// Answered DeadlineExceeded while the handler ran on: the
		// client's outcome is a timeout, and so is the middleware's
		// count of this request and its telemetry (the response is
		// already out; nothing reads this error to answer again).
		return context.Cause(ctx)
	}
	return nil
}

// logLatePanic reports a panic of a handler past its deadline: the call is
// answered DeadlineExceeded, and the request's goroutine may be gone.
func (c *call) logLatePanic(p any) {
	inbound.LogPanic(c.r, "resilienceconnect: panic in %s after its deadline was answered: %v\n%s", c.info.Procedure, p, debug.Stack())
}
