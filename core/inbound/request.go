package inbound

import (
	"context"
	"net/http"
	"net/netip"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Headers is read access to a request's header fields. http.Header
// satisfies it; an adapter for a framework with its own header type wraps
// it in a small value that does. Names are matched case-insensitively.
// Implementations are only read, possibly from several goroutines (a
// handler's and a deadline's), never written. A nil Headers
// (Request.Header) means no fields. Get and Values have no error result: a
// missing field is "" or nil.
type Headers interface {
	// Get returns the first value of the named field, or "".
	Get(name string) string
	// Values returns every value of the named field, one element per
	// header line, in arrival order.
	Values(name string) []string
}

// Request is the transport-neutral view of an inbound request: what
// priority functions and rate-limit key functions may look at, whatever
// framework received the request. The middleware stores it in the
// execution's context under HTTPRequest.
//
// An adapter fills the exported fields and passes the Request to
// Middleware.Execute, which resolves ClientIP. After that it is not
// modified again, so it is safe to read from any goroutine. The zero value
// is a request with no method, path, headers or address. A rejection
// leaves it as Execute filled it: ClientIP resolved, and RateLimit
// reporting a decision only if the rate limit admitted the request.
type Request struct {
	// Method is the HTTP method ("GET").
	Method string
	// Path is the URL path, without the query.
	Path string
	// Route is the route pattern that matched ("GET /users/{id}"), when
	// the framework knows it at this point; "" otherwise.
	Route string
	// RemoteAddr is the connection's peer, "host:port" or a bare address.
	RemoteAddr string
	// Header gives access to the request's headers; nil means none.
	Header Headers
	// ClientIP is the client's address. Execute resolves it from
	// RemoteAddr and X-Forwarded-For per Options.ClientIP when the adapter
	// leaves it invalid (the zero Addr).
	ClientIP netip.Addr
	// Raw is the framework's own request object (*http.Request for this
	// package's middleware), for functions that need more than the view.
	Raw any

	ipv6Prefix   int // from ClientIPOptions, for ClientKey
	rateLimited  bool
	rateDecision resilience.RateLimitDecision
}

// RateLimit returns the rate limiter's decision for this admitted request,
// and false when the route is not rate limited (or the limiter's store
// failed open and there are no numbers).
func (r *Request) RateLimit() (resilience.RateLimitDecision, bool) {
	if r == nil {
		return resilience.RateLimitDecision{}, false
	}
	return r.rateDecision, r.rateLimited
}

// GetHeader returns the first value of the named header, or "".
func (r *Request) GetHeader(name string) string {
	if r == nil || r.Header == nil {
		return ""
	}
	return r.Header.Get(name)
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
	r.ipv6Prefix = o.IPv6Prefix
	if r.ClientIP.IsValid() {
		return
	}
	var xff []string
	if len(o.TrustedProxies) > 0 && r.Header != nil {
		xff = r.Header.Values("X-Forwarded-For")
	}
	r.ClientIP = ResolveClientIP(r.RemoteAddr, xff, *o)
}

// HTTPRequest is the property under which the middleware stores the
// *Request view in the execution's context. Priority functions, rate-limit
// key functions, strategies of a custom pipeline and the handler itself
// read it with HTTPRequest.Value(ctx) (or RequestFrom). It is present
// whenever something may need it: a rate limit, a Priority function, or a
// custom Pipeline is configured. Without those the middleware skips it to
// save the allocation.
var HTTPRequest = resilience.NewKey[*Request]("inbound.HTTPRequest")

// RequestFrom returns the request view stored in ctx by the middleware.
func RequestFrom(ctx context.Context) (*Request, bool) {
	r, ok := HTTPRequest.Value(ctx)
	return r, ok && r != nil
}

// NetHTTPRequest returns the *http.Request behind the view stored in ctx,
// when the request came through this package's net/http middleware. It is
// the request as the middleware received it (before its context was
// replaced).
func NetHTTPRequest(ctx context.Context) (*http.Request, bool) {
	r, ok := RequestFrom(ctx)
	if !ok {
		return nil, false
	}
	hr, ok := r.Raw.(*http.Request)
	return hr, ok
}

// newHTTPRequestView builds the view of an *http.Request.
func newHTTPRequestView(r *http.Request, o *ClientIPOptions) *Request {
	v := &Request{
		Method:     r.Method,
		Path:       r.URL.Path,
		Route:      r.Pattern,
		RemoteAddr: r.RemoteAddr,
		Header:     r.Header,
		Raw:        r,
	}
	v.resolve(o)
	return v
}

// KeyByClientIP is a rate-limit key function: the client's address
// (Request.ClientKey, IPv6 grouped per ClientIPOptions.IPv6Prefix), for a
// limit per client. Requests whose address is unknown share the key "".
func KeyByClientIP(ctx context.Context) string {
	r, _ := RequestFrom(ctx)
	return r.ClientKey()
}

// KeyByHeader returns a rate-limit key function that keys on the first
// value of the named header (an API key, a tenant ID). Requests without
// the header share the key "", so combine it with an authentication step
// that rejects them, or key them otherwise with your own function.
func KeyByHeader(name string) func(ctx context.Context) string {
	name = http.CanonicalHeaderKey(name)
	return func(ctx context.Context) string {
		r, _ := RequestFrom(ctx)
		return r.GetHeader(name)
	}
}
