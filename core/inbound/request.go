package inbound

import (
	"context"
	"net/http"
	"net/netip"
	"sync"

	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// Headers is read access to a request's header fields. http.Header
// satisfies it; an adapter for a framework with its own header type wraps
// it in a small value that does. Names are matched case-insensitively.
// Implementations are only read, possibly from several goroutines (a
// handler's and a deadline's), never written. Get and Values have no error
// result: a missing field is "" or nil.
type Headers interface {
	// Get returns the first value of the named field, or "".
	Get(name string) string
	// Values returns every value of the named field, one element per
	// header line, in arrival order.
	Values(name string) []string
}

// noHeaders is the Header of a view whose framework gave none.
type noHeaders struct{}

func (noHeaders) Get(string) string      { return "" }
func (noHeaders) Values(string) []string { return nil }

// Request is the transport-neutral view of an inbound request: what
// priority functions, rate-limit key functions and the strategies of a
// custom pipeline may look at, whatever framework received the request.
// Read it with RequestFrom.
//
// The middleware builds the view itself, only when one of those functions
// may run, from the *http.Request or through the adapter's adapt.Framework.View; adapters never
// build one. Once built it is not modified, so it is safe to read from any
// goroutine, for as long as the request lasts. Route is resolved on first
// read. The zero value is a request with no method, path, headers or
// address.
type Request struct {
	// Method is the HTTP method ("GET").
	Method string
	// Path is the URL path, without the query.
	Path string
	// RemoteAddr is the connection's peer, "host:port" or a bare address.
	RemoteAddr string
	// Header gives access to the request's headers. Never nil in a view
	// the middleware built.
	Header Headers
	// ClientIP is the client's address, resolved from RemoteAddr and
	// X-Forwarded-For per Options.ClientIP unless the framework set it.
	ClientIP netip.Addr
	// Raw is the framework's own request object: *http.Request for
	// Handler, the object an adapter passed to its entry point
	// (package adapt) otherwise (*gin.Context, say). Adapters offer typed
	// accessors on it.
	Raw any

	ipv6Prefix   int // from ClientIPOptions, for ClientKey
	rateLimited  bool
	rateDecision ratelimit.Decision

	routeFn   func(raw any) string // nil: no route
	routeOnce sync.Once
	route     string
}

// Route returns the route pattern the request matches, in one format for
// every framework: the path pattern without method or host, parameters in
// braces without their constraints and a trailing wildcard as "*"
// ("/users/{id}", "/files/*", whether the framework wrote "/users/:id",
// "/users/:id<int>" or "/users/{id:[0-9]+}"); "" when no route matches or
// the framework cannot know it yet. It is
// resolved on first call (through the adapter's adapt.RouteFunc), once per
// request, and safe to call from several goroutines.
func (r *Request) Route() string {
	if r == nil {
		return ""
	}
	r.routeOnce.Do(func() {
		if r.routeFn != nil {
			r.route = r.routeFn(r.Raw)
		}
	})
	return r.route
}

// RateLimit returns the rate limiter's decision for this admitted request,
// and false when the route is not rate limited (or the limiter's store
// failed open and there are no numbers), or the decision is not made yet
// (inside the rate-limit key function).
func (r *Request) RateLimit() (ratelimit.Decision, bool) {
	if r == nil {
		return ratelimit.Decision{}, false
	}
	return r.rateDecision, r.rateLimited
}

// ClientKey returns the client's address as a string for keying, with IPv6
// addresses grouped to ClientIPOptions.IPv6Prefix ("2001:db8:1:2::/64").
// It returns "" when the address is unknown.
func (r *Request) ClientKey() string {
	if r == nil {
		return ""
	}
	return clientKey(r.ClientIP, r.ipv6Prefix)
}

// resolve fills in the derived fields from the middleware's options.
func (r *Request) resolve(o *ClientIPOptions) {
	if r.Header == nil {
		r.Header = noHeaders{}
	}
	r.ipv6Prefix = o.IPv6Prefix
	if r.ClientIP.IsValid() {
		return
	}
	var xff []string
	if len(o.TrustedProxies) > 0 {
		xff = r.Header.Values("X-Forwarded-For")
	}
	r.ClientIP = resolveClientIP(r.RemoteAddr, xff, *o)
}

// fillFromHTTP fills the transport fields of the view from an
// *http.Request.
func (r *Request) fillFromHTTP(hr *http.Request) {
	r.Method = hr.Method
	r.Path = hr.URL.Path
	r.RemoteAddr = hr.RemoteAddr
	r.Header = hr.Header
}

// viewKey is the context key of the request view.
type viewKey struct{}

// RequestFrom returns the request view in ctx: present in the context of
// priority functions, rate-limit key functions and a custom pipeline's
// strategies (and so of the handler under a custom pipeline), or put there
// with adapt.NewContext.
func RequestFrom(ctx context.Context) (*Request, bool) {
	r, ok := ctx.Value(viewKey{}).(*Request)
	return r, ok && r != nil
}

// newContext is adapt.NewContext: ctx carrying r as the request view.
func newContext(ctx context.Context, r *Request) context.Context {
	return context.WithValue(ctx, viewKey{}, r)
}

// viewContext is the context that carries a request's view to the
// functions that read it: the request's context with the view in the same
// allocation, built only when one of them may run.
type viewContext struct {
	context.Context
	req Request
}

func (c *viewContext) Value(key any) any {
	if _, ok := key.(viewKey); ok {
		return &c.req
	}
	return c.Context.Value(key)
}
