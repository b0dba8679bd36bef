// Package kit is the passage from package inbound to package adapt: the
// adapter kit's entry points are unexported methods of inbound's
// Middleware, and inbound hands them to adapt here, once, at init. This
// package cannot import inbound (inbound imports it), so its types take
// inbound's as type parameters; adapt instantiates them with the same
// types, and Get fails at adapt's init if the two ever disagree.
package kit

import (
	"context"
	"net/http"
	"time"
)

// Continue is adapt.Continue's shape: the rest of a framework's chain.
type Continue = func(w http.ResponseWriter, r *http.Request, raw any)

// DeadlineAnswer is adapt.DeadlineAnswer's method set: how an adapter
// answers a deadline in its own protocol (adapt documents each method).
type DeadlineAnswer interface {
	Answer(w http.ResponseWriter, cause error)
	End(w http.ResponseWriter, cause error) bool
	Sent(p []byte)
	Streams() bool
}

// Framework is adapt.Framework's shape, with inbound's Request as Req.
type Framework[Req any] struct {
	Route     func(raw any) string
	View      func(raw any, v *Req)
	SetHeader func(raw any, name, value string)
	RenderOwn bool
}

// Hooks are the entry points package inbound gives package adapt: M is
// inbound.Middleware, O inbound.Options, Req inbound.Request and Resp
// inbound.Response.
type Hooks[M, O, Req, Resp any] struct {
	New                func(fw Framework[Req], opts O) (*M, error)
	Serve              func(m *M, w http.ResponseWriter, r *http.Request, raw any, next Continue) error
	ServeAnswering     func(m *M, w http.ResponseWriter, r *http.Request, raw any, next Continue, deadline time.Time, answer DeadlineAnswer) error
	Execute            func(m *M, ctx context.Context, raw any, fn func(ctx context.Context) error) error
	ExecuteInPlace     func(m *M, ctx context.Context, raw any, fn func(ctx context.Context) error, expired func(cause error)) error
	Render             func(m *M, err error) (Resp, bool)
	Restyle            func(m *M, err error, def Resp) Resp
	RenderServe        func(m *M, w http.ResponseWriter, r *http.Request, err error) (Resp, bool)
	CapacityRetryAfter func(m *M) time.Duration
	Timed              func(m *M) bool
	ClosesConnection   func(m *M, err error) bool
	RateLimitFields    func(m *M) bool
	Answered           func(w http.ResponseWriter) bool
	WriteResponse      func(w http.ResponseWriter, resp Resp)
	DetachHTTP2        func(h http.Handler) http.Handler
	Detached           func(w http.ResponseWriter) bool
	NewContext         func(ctx context.Context, r *Req) context.Context
}

var hooks any

// Set is called by package inbound's init.
func Set[M, O, Req, Resp any](h *Hooks[M, O, Req, Resp]) { hooks = h }

// Get is called by package adapt's initialisation, after inbound's init.
func Get[M, O, Req, Resp any]() *Hooks[M, O, Req, Resp] {
	h, ok := hooks.(*Hooks[M, O, Req, Resp])
	if !ok {
		panic("kit: package inbound set no hooks of these types")
	}
	return h
}

// The messages of the default rejection bodies: inbound's JSON bodies
// say them, and adapt exports them for the adapters whose protocols
// have error formats of their own.
const (
	MessageCapacity     = "The server is at capacity; retry later."
	MessageShuttingDown = "The server is shutting down; retry later."
	MessageTimeout      = "The request took too long to process."
	MessageRateLimited  = "Too many requests; retry after the time in Retry-After."
	MessageRejected     = "The request was rejected; retry later."
	MessageInternal     = "The request could not be processed."
)

var draining any

// SetDraining is called by package inbound's init with what reports
// whether a middleware started to drain, for package ready.
func SetDraining[M any](f func(m *M) bool) { draining = f }

// Draining returns what SetDraining was given.
func Draining[M any]() func(m *M) bool { return draining.(func(m *M) bool) }
