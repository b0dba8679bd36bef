package resiliencechi

import (
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"net/http"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Middleware is the inbound pipeline as chi middleware. Use Handler with a
// router's Use, With or Group. A Middleware is safe for concurrent use; all
// the handlers it wraps share its limits (one concurrency cap, one rate
// limit). Build it with New: the zero value is not usable. A rejected,
// timed-out or panicking request leaves nothing behind (permit and queue
// place returned), as in inbound.Middleware.
type Middleware struct {
	in *adapt.Kit
	// rctxs recycles the scratch routing contexts of route lookups, which
	// chi fills as it walks the tree.
	rctxs sync.Pool
}

// New validates opts and returns the middleware, or a
// *resilience.ConfigError naming the first invalid field (errors.Is
// resilience.ErrInvalidOptions).
func New(opts inbound.Options) (*Middleware, error) {
	m := &Middleware{}
	m.rctxs.New = func() any { return chi.NewRouteContext() }
	in, err := adapt.New(adapt.Framework{Route: m.route}, opts)
	if err != nil {
		return nil, err
	}
	m.in = in
	return m, nil
}

// NewMiddleware is New for code that only needs the middleware function:
//
//	mw, err := resiliencechi.NewMiddleware(opts)
//	r.Use(mw)
func NewMiddleware(opts inbound.Options) (func(http.Handler) http.Handler, error) {
	m, err := New(opts)
	if err != nil {
		return nil, err
	}
	return m.Handler, nil
}

// Handler wraps next in the inbound pipeline, for chi's Use.
func (m *Middleware) Handler(next http.Handler) http.Handler { return m.in.Handler(next) }

// route is the inbound RouteFunc: the pattern chi will match for the
// *http.Request the middleware received, in inbound.Request.Route's
// format. It runs only when a priority or key function reads the route.
func (m *Middleware) route(raw any) string {
	r, ok := raw.(*http.Request)
	if !ok {
		return ""
	}
	return adapt.BraceRoute(m.pattern(r))
}

// pattern finds the route r will take, by asking the router at the root of
// r's routing context with a scratch context, as chi will do after the
// middleware. It returns "" outside a chi router or for no route. r.Pattern
// is not used: a router that has routed only as far as a mounted
// sub-router sets the mount's pattern ("/api/*").
func (m *Middleware) pattern(r *http.Request) string {
	rctx := chi.RouteContext(r.Context())
	if rctx == nil || rctx.Routes == nil {
		return ""
	}
	// rctx.Routes is the root router even inside a mounted sub-router, so
	// the lookup uses the full path (chi's RoutePath is relative to the
	// sub-router) and yields the full pattern.
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	if path == "" {
		path = "/"
	}
	method := rctx.RouteMethod
	if method == "" {
		method = r.Method
	}
	scratch := m.rctxs.Get().(*chi.Context)
	scratch.Reset()
	p := rctx.Routes.Find(scratch, method, path)
	scratch.Reset() // drop references to this request's strings
	m.rctxs.Put(scratch)
	return p
}
