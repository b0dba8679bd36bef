package resilienceconnect

import (
	"context"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Middleware is the inbound pipeline in front of connect handlers. Wrap
// each handler (or the mux holding them) with Handler. A Middleware is
// safe for concurrent use; every handler it wraps shares its limits. Build
// it with New: the zero value is not usable. A rejected, timed-out or
// panicking call leaves nothing behind (permit and queue place returned).
type Middleware struct {
	in    *adapt.Kit
	errw  *connect.ErrorWriter
	rej   rejections
	ends  streamEnds // rej.timeout as the end of a committed stream
	timed bool       // inbound's Timed: a deadline can answer for every call
	// recycle: a call that ended before ServeHTTP returned can be reused.
	// Not under a custom pipeline, whose context (the handler's) carries
	// the view, and with it the Call, beyond the handler's return.
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
	in, err := adapt.New(framework, opts)
	if err != nil {
		return nil, err
	}
	// Timed: a timeout, or a custom pipeline that may hold a timeout
	// strategy of its own.
	m := &Middleware{in: in, errw: connect.NewErrorWriter(), rej: newRejections(in.CapacityRetryAfter()), timed: in.Timed(),
		recycle: opts.Pipeline == nil}
	m.ends = newStreamEnds(m.errw, m.rej.timeout)
	return m, nil
}

// NewMiddleware is New for code that only needs the middleware function,
// as every HTTP adapter has it:
//
//	mw, err := resilienceconnect.NewMiddleware(opts)
//	mux.Handle(path, mw(handler))
func NewMiddleware(opts inbound.Options) (func(http.Handler) http.Handler, error) {
	m, err := New(opts)
	if err != nil {
		return nil, err
	}
	return m.Handler, nil
}

// framework tells inbound how to read a call: the route is Call.route
// (the view's other fields come from the *http.Request, as Serve reads
// them). Options.Render restyles connect's own errors (writeError), never
// inbound's JSON, which is not sent: its header fields are read as they
// are.
var framework = adapt.Framework{
	Route:     func(raw any) string { return raw.(*Call).route() },
	RenderOwn: true,
}

// Inbound returns the underlying inbound middleware: its Limiter to
// change the limit at run time, its RateLimiter and AdaptiveLimiter, and
// Drain, to call before the server's Shutdown (inbound.Middleware.Drain says what it does).
func (m *Middleware) Inbound() *inbound.Middleware { return m.in.Middleware }

// Stats returns the middleware's current load: Inbound().Stats(), whose
// Late and LateTotal count the handlers still running after their
// deadline was answered.
func (m *Middleware) Stats() inbound.Stats { return m.in.Stats() }

// StatsHandler serves Stats as JSON, for a debug route outside the
// middleware (the examples mount it at /debug/limits), as every adapter's
// StatsHandler does.
func (m *Middleware) StatsHandler() http.Handler { return m.in.StatsHandler() }

// Handler wraps next, a connect handler (or a mux of them), in the inbound
// pipeline. Mount the result where next would be mounted:
//
//	path, h := greetv1connect.NewGreetServiceHandler(svc, mw.HandlerOption())
//	mux.Handle(path, mw.Handler(h))
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

// serve is a call through Handler, whose next handler is next.
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	wi := classify(r)
	var deadline time.Time
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
		deadline = time.Now().Add(d)
	}
	info := calls.Get().(*Call)
	*info = Call{Procedure: r.URL.Path, Header: r.Header, Request: r, wire: wi, m: m, next: next}
	var err error
	if !m.timed && deadline.IsZero() {
		// No deadline: the handler runs here, on the request's goroutine,
		// with the real writer; only the Call is allocated.
		err = m.in.Serve(w, r, info, continueCall)
	} else {
		// inbound's deadline engine runs the call on a goroutine of its
		// own and has info.ans answer the deadline in the caller's
		// protocol, so that ServeHTTP returns then, and net/http ends the
		// response, while the handler runs on.
		info.ans = deadlineAnswer{m: m, wire: wi, method: r.Method, url: r.URL,
			contentType: r.Header.Get("Content-Type"), protocolVersion: r.Header.Get("Connect-Protocol-Version")}
		err = m.in.ServeAnswering(w, r, info, continueCall, deadline, &info.ans)
	}
	if err != nil {
		m.reject(w, r, err)
	}
	if m.recycle && !info.ans.answered {
		*info = Call{}
		calls.Put(info)
	}
}

// calls recycles the Calls that ended before ServeHTTP returned: nothing
// holds one then (the handler has returned, and a deadline firing as it
// did finds the call ended and leaves its answerer alone).
var calls = sync.Pool{New: func() any { return new(Call) }}

// continueCall runs the handler of a call inbound admitted.
func continueCall(w http.ResponseWriter, r *http.Request, raw any) {
	raw.(*Call).next.ServeHTTP(w, r)
}

// reject answers a call that was not admitted. A call whose client left
// while it queued gets nothing: the stream is aborted, since net/http
// would otherwise end it with an empty 200 of its own.
func (m *Middleware) reject(w http.ResponseWriter, r *http.Request, err error) {
	e := m.rej.rejection(m.in, r, err)
	if e == nil {
		panic(http.ErrAbortHandler)
	}
	if m.in.ClosesConnection(err) {
		// Draining: the client's next call must open a connection to
		// another instance (HTTP/1.1 closes; HTTP/2 gets a GOAWAY).
		w.Header()["Connection"] = []string{"close"}
	}
	m.writeRejection(w, r, err, e)
}
