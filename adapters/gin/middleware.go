package resiliencegin

import (
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Middleware is the inbound pipeline as gin middleware: r.Use(mw.Handler)
// on an engine or a group. A Middleware is safe for concurrent use; all
// the routes behind it share its limits (one concurrency cap, one rate
// limit). Build it with New: the zero value is not usable. A rejected,
// timed-out or panicking request leaves nothing behind (permit and queue
// place returned), as in inbound.Middleware.
type Middleware struct {
	in    *adapt.Kit
	timed bool // the chain gets the timed writer
}

// New validates opts and returns the middleware, or a
// *resilience.ConfigError naming the first invalid field (errors.Is
// resilience.ErrInvalidOptions).
func New(opts inbound.Options) (*Middleware, error) {
	in, err := adapt.New(adapt.Framework{Route: route}, opts)
	if err != nil {
		return nil, err
	}
	return &Middleware{in: in, timed: in.Timed()}, nil
}

// NewMiddleware is New for code that only needs the handler function:
//
//	mw, err := resiliencegin.NewMiddleware(opts)
//	r.Use(mw)
func NewMiddleware(opts inbound.Options) (gin.HandlerFunc, error) {
	m, err := New(opts)
	if err != nil {
		return nil, err
	}
	return m.Handler, nil
}

// Router returns router unchanged. It was needed for a 504 at the
// deadline to end its HTTP/2 stream cleanly; Handler now does that by
// itself (see the package documentation). Only if the gin in use has a
// Context this adapter cannot copy (a release that renamed the fields it
// knows) does Router still wrap router in adapt.DetachHTTP2, as the line
// the middleware then logs advises.
//
// Deprecated: the middleware ends an HTTP/2 504's stream itself; Router
// returns router unchanged. Serve the engine directly.
func (m *Middleware) Router(router http.Handler) http.Handler {
	if !m.timed || detachable {
		return router
	}
	return adapt.DetachHTTP2(router)
}

// route is the inbound RouteFunc: gin has routed before its middleware
// runs, so the pattern is c.FullPath(), in the route format chi gives.
func route(raw any) string {
	if c, ok := raw.(*gin.Context); ok {
		return adapt.ColonRoute(c.FullPath())
	}
	return ""
}

// Handler is the gin middleware: it runs the rest of c's chain through the
// inbound pipeline, or answers a rejection (429, 503) and aborts the
// chain, recording the rejection in c.Errors.
func (m *Middleware) Handler(c *gin.Context) {
	if !m.timed {
		m.serveUntimed(c)
		return
	}
	if c.Request.ProtoMajor >= 2 && detachable && !adapt.Detached(c.Writer) {
		m.serveDetached(c)
		return
	}
	m.serveTimed(c)
}

// serveTimed is Handler with a timeout, on the request's goroutine: every
// HTTP/1 request, and an HTTP/2 one whose router runs it detached already
// (adapt.DetachHTTP2 around the engine). Over HTTP/2 serveDetached runs it
// on a worker, for a copy of c.
func (m *Middleware) serveTimed(c *gin.Context) {
	req := c.Request
	// The wrapper waits in c.Writer for admitted, which finds it there;
	// finish takes it out again, whatever happens.
	rw := writers.Get().(*responseWriter)
	orig := rw.install(c)
	completed := false
	defer func() {
		if !completed { // a panic from the chain, on its way out
			c.Request = req
			rw.finish(c, false)
		}
	}()
	err := m.in.Serve(orig, req, c, admitted)
	completed = true
	c.Request = req
	rw.finish(c, true)
	if err != nil {
		m.reject(c, req, err)
	}
}

// serveUntimed is Handler without a timeout: nothing writes for the chain
// but the chain itself, so c.Writer stays gin's writer unless the inbound
// middleware gives the chain a writer of its own (see admittedUntimed).
func (m *Middleware) serveUntimed(c *gin.Context) {
	req := c.Request
	completed := false
	defer func() {
		if !completed { // a panic from the chain, on its way out
			c.Request = req
		}
	}()
	err := m.in.Serve(c.Writer, req, c, admittedUntimed)
	completed = true
	c.Request = req
	if err != nil {
		m.reject(c, req, err)
	}
}

// admittedUntimed continues c's chain without a timeout. If the inbound
// middleware wraps gin's writer (to read the status, for the adaptive
// limiter), the chain writes through the wrapper, installed for the chain
// only: with no deadline, nothing else can write once it returns.
func admittedUntimed(w http.ResponseWriter, r *http.Request, raw any) {
	c := raw.(*gin.Context)
	c.Request = r
	if w == http.ResponseWriter(c.Writer) {
		c.Next()
		return
	}
	rw := writers.Get().(*responseWriter)
	rw.install(c)
	rw.start(w)
	completed := false
	defer func() { rw.finish(c, completed) }()
	c.Next()
	rw.passStatus()
	completed = true
}

// admitted continues c's chain once the inbound middleware admitted the
// request: c.Writer writes through w (unless w is gin's writer itself),
// and c.Request carries the pipeline's context, with its deadline.
func admitted(w http.ResponseWriter, r *http.Request, raw any) {
	c := raw.(*gin.Context)
	c.Request = r
	rw, ok := c.Writer.(*responseWriter)
	if !ok || rw.w != nil {
		c.Next()
		return
	}
	if w == http.ResponseWriter(rw.orig) {
		c.Writer = rw.orig // nothing to intercept
		c.Next()
		return
	}
	rw.start(w)
	c.Next()
	rw.passStatus()
}

// reject answers a rejection on gin's writer and stops the chain: the
// rendered status, fields and body, byte for byte what the net/http
// middleware sends, and the error in c.Errors for gin's logger and error
// middleware. A client that left while queued gets nothing: its connection
// is dropped, never left to gin's implicit empty 200.
func (m *Middleware) reject(c *gin.Context, req *http.Request, err error) {
	_ = c.Error(err) // ErrorTypePrivate: logged, never rendered by gin
	c.Abort()
	resp, ok := m.in.RenderServe(c.Writer, req, err)
	if !ok {
		dropConnection(c, req)
		return
	}
	adapt.WriteResponse(c.Writer, resp)
}

// dropConnection ends a request whose client left with nothing written.
// On HTTP/1 the connection is hijacked and closed: gin's Recovery swallows
// http.ErrAbortHandler and gin would then send its pending 200. On HTTP/2,
// which cannot be hijacked, the stream is reset by the panic.
func dropConnection(c *gin.Context, req *http.Request) {
	if req.ProtoMajor < 2 {
		if conn, _, err := c.Writer.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}
