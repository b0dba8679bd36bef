// Package resilienceecho puts resilience's inbound load shedding in front
// of echo (v4) routes: rate limit (429) → concurrency limiter with a
// priority queue (503) → timeout (504), configured by inbound.Options and
// behaving exactly as core/inbound documents (it passes the conformance
// suite in full).
//
//	mw, err := resilienceecho.New(inbound.Options{
//		Timeout:     5 * time.Second,
//		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 200, QueueLimit: 100, QueueTimeout: 500 * time.Millisecond},
//	})
//	if err != nil {
//		return err // a *resilience.ConfigError naming the field
//	}
//	e := echo.New()
//	e.GET("/healthz", health) // outside the group: never shed
//	api := e.Group("", mw.Handler)
//	api.GET("/users/:id", getUser)
//
// # The request in priority and key functions
//
// echo has routed a request before its middleware runs, so
// inbound.Request.Route is echo's pattern (c.Path()) in the format every
// adapter gives ("/users/:id" is "/users/{id}", "/files/*" stays
// "/files/*"), resolved only when a function reads it. Context returns the
// echo.Context itself.
//
// # In echo's flow
//
// A rejection (429, 503) is returned, not written: the rendered fields
// (Content-Type, Retry-After, RateLimit-*) are set on the response first,
// and the error is an *echo.HTTPError with the rendered status, the body
// as its Message (a json.RawMessage) and the typed rejection as its
// Internal error, for echo's HTTPErrorHandler. With echo's default handler
// the client gets the status, fields and body the net/http middleware
// sends, byte for byte: that handler would re-encode the body (a newline
// after it; indented under e.Debug or a client's ?pretty; HTML escaped; a
// text body in {"message": …}) and answer HEAD without a Content-Length,
// so the adapter's writer sends the rendered body instead of echo's
// encoding of it, and the length for HEAD. A custom handler renders its
// own format from the HTTPError and errors.As on the rejection; what it
// writes passes unchanged. A body from Options.Render that is not JSON
// becomes a string Message. A request whose client left while it queued
// gets nothing.
//
// An admitted request runs next on the request's goroutine, with
// c.Request() carrying the pipeline's context (its deadline) and
// c.Response() writing through the inbound middleware's timed writer, so
// Flush and Hijack keep working. At the deadline that writer sends the
// 504 on the writer underneath echo's Response; nothing touches the
// echo.Context from the deadline's goroutine, and the middleware returns
// only when the handler does. The late handler's writes fail with
// http.ErrHandlerTimeout. Once the handler returns, c.Response() reads
// committed with status 504, and the middleware returns nil whatever the
// handler returned: the 504 is the response, so echo's error handler,
// middleware.Recover (after a late panic, which propagates once the
// permit is back) or a later middleware do not write another. echo's
// middleware.ContextTimeout composes either way round: outside, its
// deadline is the request's and the 504 comes at it; inside, its 503 is
// returned like any handler error.
//
// A handler error returned in time is rendered by echo's error handler
// after the middleware, so the adaptive limiter (Options.Adaptive) counts
// such a request by the status the handler wrote itself (none: 200).
//
// # Over HTTP/2
//
// e.Use(mw.Handler) is all HTTP/2 needs, e.StartTLS included: a timed
// HTTP/2 request's 504 at the deadline ends its stream cleanly while a
// late handler runs on. HTTP/2 ends a stream only when the server's
// ServeHTTP returns, and echo's returns only when its chain does, then
// recycles the context; so over HTTP/2, with a timeout, the middleware
// runs the pipeline and the rest of the chain on a goroutine of its own,
// for a copy of echo's context that the late handler keeps once echo has
// recycled the original (its own store values, params and Response,
// writing through the timed writer), and returns at the first of the
// chain's return and the 504. A chain that returns in time leaves
// everything as over HTTP/1: its store values, params and Response are
// copied back, its error is returned for echo's HTTPErrorHandler, and a
// panic reaches echo's Recover (raised again on the request's goroutine,
// so the stack Recover prints starts there). Response Before and After hooks that
// earlier middlewares registered run for the copy while the request is in
// time, never after its 504. After the 504 the request is over: the late
// handler's error is dropped, and its panic, which no Recover around the
// request can catch any more, is logged to the server's ErrorLog as
// net/http logs a handler's. HTTP/1 requests run as before, on the
// request's goroutine.
//
// Only echo's own context can be copied. An application whose middlewares
// pass a custom context (a struct wrapping echo.Context) to the rest of
// the chain serves echo through Middleware.Router
// (srv.Handler = mw.Router(e)), which runs each HTTP/2 request on a
// goroutine of its own; without it such a request's 504 goes out whole at
// the deadline, its stream is then reset, and the server's ErrorLog says
// so once.
//
// Every capability of the conformance suite is supported; nothing is
// declared missing.
package resilienceecho

import (
	"context"

	"github.com/labstack/echo/v4"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Context returns the echo.Context of the request that a priority
// function, a rate-limit key function or a custom pipeline's strategy is
// running for, from the ctx it was given. Use it on that call's goroutine,
// while the call runs: echo recycles the context once the request ends.
func Context(ctx context.Context) (echo.Context, bool) {
	r, ok := inbound.RequestFrom(ctx)
	if !ok {
		return nil, false
	}
	c, ok := r.Raw.(echo.Context)
	return c, ok
}
