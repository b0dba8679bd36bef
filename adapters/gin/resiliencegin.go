// Package resiliencegin puts resilience's inbound load shedding in front
// of gin routes: rate limit (429) → concurrency limiter with a priority
// queue (503) → timeout (504), configured by inbound.Options and behaving
// exactly as core/inbound documents (it passes the conformance suite in
// full, with gin.Engine.ContextWithFallback off and on).
//
//	mw, err := resiliencegin.New(inbound.Options{
//		Timeout:     5 * time.Second,
//		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 200, QueueLimit: 100, QueueTimeout: 500 * time.Millisecond},
//	})
//	if err != nil {
//		return err // a *resilience.ConfigError naming the field
//	}
//	r := gin.New()
//	r.GET("/healthz", health) // registered before Use: never shed
//	r.Use(mw.Handler)
//	r.GET("/users/:id", getUser)
//
// # The request in priority and key functions
//
// gin has routed a request before its middleware runs, so
// inbound.Request.Route is gin's pattern in the format every adapter
// gives ("/users/:id" is "/users/{id}", "/files/*path" is "/files/*"),
// resolved only when a function reads it. Context returns the
// *gin.Context itself:
//
//	Priority: func(ctx context.Context) int {
//		if c, ok := resiliencegin.Context(ctx); ok && c.GetHeader("X-Tier") == "gold" {
//			return 0
//		}
//		return 1
//	},
//
// # In gin's flow
//
// A rejection (429, 503) is written on gin's writer with the status,
// fields and body the net/http middleware sends, byte for byte; the chain
// is aborted (later handlers do not run) and the typed error is added to
// c.Errors (gin.ErrorTypePrivate) for loggers and error middleware. A
// request whose client left while it queued gets nothing.
//
// An admitted request runs the rest of the chain with c.Request carrying
// the pipeline's context (its deadline; with ContextWithFallback the
// *gin.Context reports it too; without, use c.Request.Context() as gin
// documents) and c.Writer writing through the inbound middleware's timed
// writer. At the deadline the 504 is written by that writer, under its
// lock, on gin's own writer; nothing touches the *gin.Context from the
// deadline's goroutine. Over HTTP/1 the chain runs on the request's
// goroutine and the middleware returns only when the handler does, so
// gin cannot recycle the context under a late handler. The late handler's writes return http.ErrHandlerTimeout
// and are dropped (gin's c.Render adds that to c.Errors). After a 504,
// c.Writer stays closed for the rest of the request: it reports the 504
// as written and drops writes, so gin's Recovery (after a late panic,
// which propagates once the permit is back) or an error renderer cannot
// write a second response. Hijack and Flush work through c.Writer.
//
// One limit follows from gin's design, over HTTP/1: c.Copy() copies
// gin's writer, whose status and size the 504 updates at the deadline
// (gin's engine must see the 504 there, or it would send a header of its
// own after it). Copy the context before the handler's deadline, as gin
// advises before starting the goroutine that needs it; a Copy made while
// the 504 is being written reads those two fields as they change (the
// race detector reports it).
//
// # Over HTTP/2
//
// HTTP/2 ends a stream only when the server's ServeHTTP returns, and
// gin's engine returns only when its chain does, then recycles the
// *gin.Context. So over HTTP/2, with a timeout, the middleware runs the
// rest of the chain on a goroutine of its own for a copy of the
// *gin.Context, which the late handler keeps once gin has recycled the
// original (its params, keys, errors and writer are its own), and returns
// at the first of the chain's return and the 504: the 504's stream ends
// cleanly while a late handler runs on, with r.Use(mw.Handler) alone
// (r.RunTLS, r.Run with UseH2C, or any server serving the engine). The middleware in
// front then finds c as follows:
//
//   - the chain returned in time: what it did to the copy (keys, errors,
//     params, status, c.Abort) is in c, as over HTTP/1;
//   - after a 504: the chain aborted (gin runs no later handler on c), the
//     504 in c.Writer, which drops writes as after an HTTP/1 504, and c's
//     keys and errors as they were before the middleware: what the late
//     handler sets stays in its copy;
//   - a panic of the chain before the deadline propagates to gin's
//     Recovery in front, raised again on the request's goroutine (so the
//     stack Recovery prints starts there, not at the handler's line); one
//     after the 504, when the request is over, is logged to the server's
//     ErrorLog as net/http logs a handler's panic, with its own stack.
//
// Middleware.Router is deprecated and returns the router unchanged; an
// engine served through adapt.DetachHTTP2 (what Router returned before)
// is not detached a second time. The copy costs a goroutine and a few
// allocations per timed HTTP/2 request; HTTP/1 requests and a middleware
// without a timeout run as before. It sets private fields of gin's
// Context as of gin v1.12; on a gin whose Context it cannot copy (a
// release that renamed them), a timed HTTP/2 request's 504 is sent whole,
// then its stream is reset, the first such request is logged, and Router
// wraps the router in adapt.DetachHTTP2 again, as that line advises.
//
// Every capability of the conformance suite is supported; nothing is
// declared missing.
package resiliencegin

import (
	"context"

	"github.com/gin-gonic/gin"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Context returns the *gin.Context of the request that a priority
// function, a rate-limit key function or a custom pipeline's strategy is
// running for, from the ctx it was given. Use it on that call's goroutine,
// while the call runs: gin recycles the *gin.Context once the request
// ends.
func Context(ctx context.Context) (*gin.Context, bool) {
	r, ok := inbound.RequestFrom(ctx)
	if !ok {
		return nil, false
	}
	c, ok := r.Raw.(*gin.Context)
	return c, ok
}
