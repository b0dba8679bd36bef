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
// An admitted request runs the rest of the chain on the request's
// goroutine, with c.Request carrying the pipeline's context (its deadline;
// with ContextWithFallback the *gin.Context reports it too; without, use
// c.Request.Context() as gin documents) and c.Writer writing through the
// inbound middleware's timed writer. At the deadline the 504 is written by
// that writer, under its lock, on gin's own writer; nothing touches the
// *gin.Context from the deadline's goroutine, and the middleware returns
// only when the handler does, so gin cannot recycle the context under a
// late handler. The late handler's writes return http.ErrHandlerTimeout
// and are dropped (gin's c.Render adds that to c.Errors). After a 504,
// c.Writer stays closed for the rest of the request: it reports the 504
// as written and drops writes, so gin's Recovery (after a late panic,
// which propagates once the permit is back) or an error renderer cannot
// write a second response. Hijack and Flush work through c.Writer.
//
// One limit follows from gin's design: c.Copy() copies gin's writer,
// whose status and size the 504 updates at the deadline (gin's engine
// must see the 504 there, or it would send a header of its own after
// it). Copy the context before the handler's deadline, as gin advises
// before starting the goroutine that needs it; a Copy made while the 504
// is being written reads those two fields as they change (the race
// detector reports it).
//
// Serve the router through Middleware.Router (srv.Handler = mw.Router(r)),
// as the quick start does: over HTTP/2 it runs each request on a goroutine
// of its own, so that the 504 at the deadline ends its stream cleanly
// while a late handler runs on. HTTP/2 ends a stream only when ServeHTTP
// returns, and gin's chain cannot return before a late handler does,
// since gin recycles its context then: the middleware alone cannot do
// it. A timed HTTP/2 request that arrives without Router is logged, once,
// to the server's ErrorLog; its 504 goes out whole at the deadline and its
// stream is then reset. HTTP/1 requests pass through Router unchanged.
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
