package inbound

import (
	"context"
	"github.com/ylcnfrht/resilience/core/inbound/internal/kit"
	"github.com/ylcnfrht/resilience/core/internal/route"
	"net/http"

	resilience "github.com/ylcnfrht/resilience/core"
)

// The adapter kit (package adapt) reaches the middleware through the
// unexported entry points below; kit.go hands them over. Their
// documentation is adapt's, for adapter authors.

// framework is what an adapter tells the middleware about its
// framework (adapt.Framework): how to resolve the route, fill the view
// and set a response header. The zero framework is plain net/http.
type framework = kit.Framework[Request]

// patternRoute is the default route resolver: the Pattern of raw, an
// *http.Request routed by http.ServeMux, in Request.Route's format.
func patternRoute(raw any) string {
	r, ok := raw.(*http.Request)
	if !ok {
		return ""
	}
	return route.Mux(r.Pattern)
}

// continueFunc is adapt.Continue: the rest of a framework's chain.
type continueFunc = kit.Continue

// serve is adapt.Kit.Serve, documented there.
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, raw any, next continueFunc) error {
	if next == nil {
		return resilience.ErrNilCallback
	}
	if raw == nil {
		raw = r
	}
	c := call{ctx: r.Context(), raw: raw, w: w, r: r, cont: next}
	return m.dispatch(&c)
}

// execute is adapt.Kit.Execute, documented there.
func (m *Middleware) execute(ctx context.Context, raw any, fn func(ctx context.Context) error) error {
	if fn == nil {
		return resilience.ErrNilCallback
	}
	c := call{ctx: ctx, raw: raw, fn: fn}
	return m.dispatch(&c)
}

// executeInPlace is adapt.Kit.ExecuteInPlace, documented there.
func (m *Middleware) executeInPlace(ctx context.Context, raw any, fn func(ctx context.Context) error, expired func(cause error)) error {
	if fn == nil {
		return resilience.ErrNilCallback
	}
	// One call value, whichever way: the frame stays small, which matters
	// on the goroutine an adapter may start for each request.
	c := call{ctx: ctx, raw: raw, fn: fn}
	if m.timed() {
		// The deadline (runFn) counts the call late and calls expired,
		// unless fn has returned.
		c.expired = expired
	}
	return m.dispatch(&c)
}

// wasAnswered is adapt.Answered, documented there: whether the
// middleware answered at the deadline on w, a writer Serve passed on.
func wasAnswered(w http.ResponseWriter) bool {
	tw, ok := w.(*timeoutWriter)
	return ok && tw.answered
}

// renderServe is adapt.Kit.RenderServe, documented there: Render, or
// the 503 shutting-down for a client still there whose context the
// server ended, or nothing (false) for a client that left.
func (m *Middleware) renderServe(w http.ResponseWriter, r *http.Request, err error) (Response, bool) {
	if resp, ok := m.render(err); ok {
		return resp, true
	}
	if clientGone(w) {
		return Response{}, false
	}
	resp, _ := m.render(errShuttingDown)
	return resp, true
}

// deadlineAnswer is adapt.DeadlineAnswer: how an adapter answers a
// deadline in its own protocol.
type deadlineAnswer = kit.DeadlineAnswer
