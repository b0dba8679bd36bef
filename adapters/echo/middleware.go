package resilienceecho

import (
	"encoding/json"
	"net/http"
	"reflect"
	"sync"

	"github.com/labstack/echo/v4"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// Middleware is the inbound pipeline as echo middleware: e.Use(mw.Handler),
// or on a group or a route. A Middleware is safe for concurrent use; all
// the routes behind it share its limits (one concurrency cap, one rate
// limit). Build it with New: the zero value is not usable. A rejected,
// timed-out or panicking request leaves nothing behind (permit and queue
// place returned), as in inbound.Middleware.
type Middleware struct {
	in *adapt.Kit
	// customRender: Options.Render may render a body that is not JSON.
	customRender bool
	// timed: the handler gets the timed writer (a timeout or a custom
	// pipeline), which answers its deadline; otherwise a deadline passing
	// is the handler's to answer.
	timed bool
	// timeoutSize is the length of the 504 body the timed writer sends.
	timeoutSize int64
}

// New validates opts and returns the middleware, or a
// *resilience.ConfigError naming the first invalid field (errors.Is
// resilience.ErrInvalidOptions).
func New(opts inbound.Options) (*Middleware, error) {
	in, err := adapt.New(adapt.Framework{Route: route}, opts)
	if err != nil {
		return nil, err
	}
	m := &Middleware{in: in, customRender: opts.Render != nil, timed: in.Timed()}
	if resp, ok := in.Render(&resilience.TimeoutRejectedError{Timeout: opts.Timeout}); ok {
		m.timeoutSize = int64(len(resp.Body))
	}
	return m, nil
}

// NewMiddleware is New for code that only needs the middleware function:
//
//	mw, err := resilienceecho.NewMiddleware(opts)
//	e.Use(mw)
func NewMiddleware(opts inbound.Options) (echo.MiddlewareFunc, error) {
	m, err := New(opts)
	if err != nil {
		return nil, err
	}
	return m.Handler, nil
}

// Router returns router ready to be the server's handler
// (srv.Handler = mw.Router(e)), for an application whose middlewares pass
// a custom context of their own (a struct wrapping echo.Context) to the
// rest of the chain: over HTTP/2 each request then runs on a goroutine of
// its own, so that a 504 at the deadline ends its stream cleanly while a
// late handler runs on. On echo's own context the middleware does that by
// itself, and Router is not needed (see the package documentation); under
// Router it leaves the request on Router's goroutine. HTTP/1 requests pass
// through. Any http.Handler that routes to this middleware may be passed,
// *echo.Echo or a wrapper of one.
func (m *Middleware) Router(router http.Handler) http.Handler {
	if !m.timed {
		return router // nothing is answered at a deadline: nothing to detach
	}
	return adapt.DetachHTTP2(router)
}

// route is the inbound RouteFunc: echo has routed before its middleware
// runs, so the pattern is c.Path(), in the route format chi gives.
func route(raw any) string {
	if c, ok := raw.(echo.Context); ok {
		return adapt.ColonRoute(c.Path())
	}
	return ""
}

// Handler is the echo middleware: it runs next through the inbound
// pipeline, or returns a rejection (429, 503) as an *echo.HTTPError for
// echo's HTTPErrorHandler.
func (m *Middleware) Handler(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if m.timed && c.Request().ProtoMajor >= 2 && detachable && reflect.TypeOf(c) == contextType && !adapt.Detached(c.Response().Writer) {
			return m.serveDetached(c, next)
		}
		return m.serve(c, next)
	}
}

// call carries next from serve to admitted, and next's error back: it
// waits in c.Response().Writer, where admitted finds it, until then.
type call struct {
	http.ResponseWriter // echo's writer underneath, for anyone who writes meanwhile
	next                echo.HandlerFunc
	w                   http.ResponseWriter // the inbound middleware's, once admitted
	err                 error
}

var calls = sync.Pool{New: func() any { return new(call) }}

// serve is Handler on the request's goroutine: every HTTP/1 request, an
// HTTP/2 one without a timeout, under a router already detached
// (adapt.DetachHTTP2) or on a context that is not echo's own. Over HTTP/2
// serveDetached runs the pipeline on a worker, for a copy of c.
func (m *Middleware) serve(c echo.Context, next echo.HandlerFunc) error {
	orig, req := c.Response().Writer, c.Request()
	var answered bool
	err, handlerErr := m.run(c, next, &answered)
	return m.outcome(c, orig, req, err, handlerErr, answered)
}

// run runs next on c through the inbound pipeline, and returns the
// pipeline's error (a rejection) and next's; *answered reports, even on a
// panic's way out, whether the deadline answered.
func (m *Middleware) run(c echo.Context, next echo.HandlerFunc, answered *bool) (err, handlerErr error) {
	res, req := c.Response(), c.Request()
	orig := res.Writer
	cl := calls.Get().(*call)
	cl.ResponseWriter, cl.next = orig, next
	res.Writer = cl
	completed := false
	defer func() {
		if !completed { // a panic from the chain, on its way out
			_, *answered = m.finish(c, cl, orig, req, false)
		}
	}()
	err = m.in.Serve(orig, req, c, admitted)
	completed = true
	handlerErr, *answered = m.finish(c, cl, orig, req, true)
	return err, handlerErr
}

// outcome is what Handler returns once run has: a rejection as echo's
// error (answered on orig, echo's writer), nil after the 504 (the 504 is
// the response; the late handler's error has no one to go to), or next's
// error.
func (m *Middleware) outcome(c echo.Context, orig http.ResponseWriter, req *http.Request, err, handlerErr error, answered bool) error {
	switch {
	case err != nil:
		return m.reject(c, orig, req, err)
	case answered:
		return nil
	}
	return handlerErr
}

// admitted runs next once the inbound middleware admitted the request: on
// w (the timed writer when a timeout is set) under echo's Response, with
// the pipeline's context (its deadline) in c.Request().
func admitted(w http.ResponseWriter, r *http.Request, raw any) {
	c := raw.(echo.Context)
	res := c.Response()
	cl, ok := res.Writer.(*call)
	if !ok {
		panic("resilienceecho: c.Response().Writer was replaced before the handler ran")
	}
	res.Writer = w
	c.SetRequest(r)
	cl.w = w
	cl.err = cl.next(c)
}

// finish gives c back its request and echo's writer once the inbound
// middleware has returned (completed) or is unwinding a panic, when the
// deadline can no longer write. It returns next's error, and whether the
// deadline answered: then the 504 was sent (or the committed response
// cut), and echo's Response reports it committed, so that echo's error
// handler, Recover or a later middleware writes nothing more.
func (m *Middleware) finish(c echo.Context, cl *call, orig http.ResponseWriter, req *http.Request, completed bool) (error, bool) {
	res := c.Response()
	res.Writer = orig
	c.SetRequest(req)
	err, answered := cl.err, m.timed && adapt.Answered(cl.w)
	*cl = call{}
	calls.Put(cl)
	if answered {
		if completed || !res.Committed {
			// A panicking handler that had committed was cut at the
			// deadline; otherwise the 504 went out.
			res.Status, res.Size = http.StatusGatewayTimeout, m.timeoutSize
		}
		res.Committed = true
	}
	return err, answered
}

// reject turns a rejection into echo's error flow: the rendered fields
// (Content-Type, Retry-After, RateLimit-*) set on the response first, and
// an *echo.HTTPError with the rendered status, the body as its Message and
// the typed rejection as its Internal error. A client that left while
// queued gets nothing: the connection is dropped (http.ErrAbortHandler,
// which echo's Recover passes on), never left to an implicit empty 200.
func (m *Middleware) reject(c echo.Context, w http.ResponseWriter, req *http.Request, err error) error {
	resp, ok := m.in.RenderServe(w, req, err)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	res := c.Response()
	h := res.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	he := &echo.HTTPError{Code: resp.Status, Message: json.RawMessage(resp.Body), Internal: err}
	text := m.customRender && !json.Valid(resp.Body)
	if text {
		he.Message = string(resp.Body)
	}
	// echo's default error handler re-encodes the Message: exactBody sends
	// the rendered body instead, byte for byte.
	res.Writer = &exactBody{ResponseWriter: res.Writer, res: res, err: he, body: resp.Body, text: text, head: req.Method == http.MethodHead}
	return he
}
