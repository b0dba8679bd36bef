package resilienceconnect

import (
	"context"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Call is what priority and rate-limit key functions know about an RPC
// before it is admitted: its procedure, protocol, peer, headers and, when
// the handler was built with Middleware.HandlerOption, its connect.Spec.
// Read it with CallFrom; it is the view's Raw. A Call is built by the
// middleware and only read afterwards, so it is safe to read from any
// goroutine; do not modify it or its Header.
type Call struct {
	// Procedure is the RPC's name as its URL path gives it,
	// "/pkg.Service/Method": the view's Route, unless an outer ServeMux
	// routed a plain HTTP request by a pattern ("/users/{id}").
	Procedure string
	// Header holds the request's header fields (metadata).
	Header http.Header
	// Request is the HTTP request as the middleware received it.
	Request *http.Request

	wire wire
	m    *Middleware
	next http.Handler
	ans  deadlineAnswer // a timed call's answer at its deadline
}

// route is the view's Route: the procedure, unless an outer ServeMux
// routed the request to a pattern that names the route whole (an exact or
// wildcard pattern, "/users/{id}"), as for plain HTTP routes beside the
// procedures. A subtree pattern ("/pkg.Service/", where generated
// handlers are mounted) names no single route: the procedure is used.
func (c *Call) route() string {
	if p := adapt.PatternRoute(c.Request); p != "" && !strings.HasSuffix(p, "/") {
		return p
	}
	return c.Procedure
}

// CallFrom returns the Call of the RPC whose context ctx is, as stored by
// the middleware: in priority and key functions, and in the handler.
func CallFrom(ctx context.Context) (*Call, bool) {
	v, ok := inbound.RequestFrom(ctx)
	if !ok {
		return nil, false
	}
	c, ok := v.Raw.(*Call)
	return c, ok
}

// Protocol returns the RPC protocol of the call: connect.ProtocolConnect,
// connect.ProtocolGRPC or connect.ProtocolGRPCWeb. A request in no RPC
// protocol reads as Connect, as connect's own ErrorWriter treats it.
func (c *Call) Protocol() string { return c.wire.protocol() }

// Peer describes the caller as connect's handler will: its address, the
// protocol and, for a Connect GET, the query parameters.
func (c *Call) Peer() connect.Peer {
	p := connect.Peer{Addr: c.Request.RemoteAddr, Protocol: c.wire.protocol()}
	if c.Request.Method == http.MethodGet && c.wire == wireConnectUnary {
		p.Query = c.Request.URL.Query()
	}
	return p
}

// Spec returns the procedure's connect.Spec (stream type, idempotency,
// schema) and true when its handler was built with
// Middleware.HandlerOption. Otherwise it returns a Spec with only
// Procedure set, and false.
func (c *Call) Spec() (connect.Spec, bool) {
	if v, ok := c.m.specs.Load(c.Procedure); ok {
		return v.(connect.Spec), true
	}
	return connect.Spec{Procedure: c.Procedure}, false
}

// HandlerOption returns a connect.HandlerOption that records each
// procedure's Spec as its handler is built, so that Call.Spec knows it
// before the call is admitted. Pass it to the generated New…Handler
// function (or to connect.NewUnaryHandler and the others). It adds nothing
// to the handlers themselves.
func (m *Middleware) HandlerOption() connect.HandlerOption {
	return connect.WithConditionalHandlerOptions(func(spec connect.Spec) []connect.HandlerOption {
		m.specs.Store(spec.Procedure, spec)
		return nil
	})
}
