package resiliencegin

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Middleware is the inbound pipeline as gin middleware: r.Use(mw.Handler)
// on a router or a group. A Middleware is safe for concurrent use; all the
// routes behind it share its limits (one concurrency cap, one rate limit).
// Build it with New: the zero value is not usable. A rejected, timed-out
// or panicking request leaves nothing behind (permit and queue place
// returned), as in inbound.Middleware.
type Middleware struct {
	in   *inbound.Middleware
	h    http.Handler
	view bool // a function may read the request view
}

// New validates opts and returns the middleware, or a
// *resilience.ConfigError naming the first invalid field (errors.Is
// resilience.ErrInvalidOptions).
func New(opts inbound.Options) (*Middleware, error) {
	in, err := inbound.New(opts)
	if err != nil {
		return nil, err
	}
	m := &Middleware{in: in, view: opts.RateLimit != nil || opts.Pipeline != nil ||
		(opts.Concurrency != nil && opts.Concurrency.Priority != nil) ||
		(opts.Adaptive != nil && opts.Adaptive.Priority != nil)}
	m.h = in.Handler(http.HandlerFunc(admitted))
	return m, nil
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

// Inbound returns the underlying inbound middleware: its Stats and
// StatsHandler, and its Limiter to change the limit at run time.
func (m *Middleware) Inbound() *inbound.Middleware { return m.in }

// Stats returns the middleware's current load (see inbound.Stats).
func (m *Middleware) Stats() inbound.Stats { return m.in.Stats() }

// call carries one request from Handler to admitted through the inbound
// middleware.
type call struct {
	c   *gin.Context
	ran bool
}

type callKey struct{}

// Handler is the gin middleware: it runs the rest of c's chain through
// the inbound pipeline, or answers a rejection and aborts the chain.
func (m *Middleware) Handler(c *gin.Context) {
	orig, req := c.Writer, c.Request
	// The wrapper waits in c.Writer for admitted, which finds it there;
	// finish takes it out again whatever happens.
	rw := writers.Get().(*responseWriter)
	rw.install(c)
	completed := false
	defer func() {
		if !completed {
			c.Request = req
			rw.finish(c, false)
		}
	}()
	cl := &call{c: c}
	r := req.WithContext(context.WithValue(req.Context(), callKey{}, cl))
	if m.view {
		r.Pattern = colonRoute(c.FullPath())
	}
	m.h.ServeHTTP(orig, r)
	completed = true
	c.Request = req
	rw.finish(c, true)
	if !cl.ran {
		c.Abort()
	}
}

// admitted continues the chain once the inbound middleware admitted the
// request: c.Writer writes through w (unless w is gin's writer itself),
// and c.Request carries the pipeline's context, with its deadline.
func admitted(w http.ResponseWriter, r *http.Request) {
	cl := r.Context().Value(callKey{}).(*call)
	cl.ran = true
	c := cl.c
	c.Request = r
	if rw, ok := c.Writer.(*responseWriter); ok && rw.w == nil {
		if w == http.ResponseWriter(rw.orig) {
			c.Writer = rw.orig // nothing to intercept
		} else {
			rw.start(w, r.Context())
		}
	}
	c.Next()
}
