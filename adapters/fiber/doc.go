// Package resiliencefiber puts the inbound pipeline (rate limit →
// concurrency limiter → timeout, package inbound) in front of fiber v2
// handlers. fiber runs on fasthttp, not net/http; the middleware gives the
// same statuses, JSON bodies and headers as the net/http middleware, and
// this documentation says where fasthttp makes it behave otherwise.
//
// # Quick start
//
//	mw, err := resiliencefiber.New(inbound.Options{
//		Timeout:     5 * time.Second,
//		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 200, QueueLimit: 100, QueueTimeout: 500 * time.Millisecond},
//	})
//	if err != nil {
//		log.Fatal(err) // a *resilience.ConfigError naming the field
//	}
//	app := fiber.New()
//	app.Use(recover.New()) // panics become 500s
//	app.Get("/healthz", func(c *fiber.Ctx) error { return nil }) // before the middleware: never shed
//	app.Get("/orders/:id", mw.Handler, func(c *fiber.Ctx) error {
//		return fetchOrder(c.UserContext(), c.Params("id")) // the context ends at the deadline
//	})
//	resiliencefiber.ServeOnTime(app) // the 504 at the deadline, not when the handler returns
//	log.Fatal(app.Listen("127.0.0.1:8080"))
//
// The handler's context is c.UserContext(): it ends at the deadline (Err
// context.DeadlineExceeded, cause a *resilience.TimeoutRejectedError) and
// is the one to pass to every call the handler makes. A net/http handler
// mounted with HTTPHandler gets it as its request's context (fiber's own
// adaptor gives fasthttp's RequestCtx, which never carries the deadline).
//
// # The 504 at the deadline: two ways
//
// fasthttp writes a response only when the server's handler returns, and
// fiber hands its pooled Ctx to the next request as soon as its handler
// returns; a middleware cannot return early while the rest of the chain
// still runs, nor write from another goroutine. So the middleware alone
// ends the handler's context at the deadline and answers the 504 when the
// handler returns: a handler that watches its context stops at once, but
// one that ignores it keeps its client waiting (and its permit) until it
// returns.
//
// The 504 on time comes from one level down. ServeOnTime(app), before
// app.Listen, or OnTimeHandler(app.Handler()) for a fasthttp.Server of your
// own, runs each request's fiber handler on a goroutine of its own while
// the connection's goroutine waits. At the deadline the middleware hands it
// the 504 (through adapt.Kit.ExecuteInPlace), and it returns after
// calling RequestCtx.TimeoutErrorWithResponse: fasthttp sends that
// complete 504 (with Connection: close) and never reuses the RequestCtx,
// which the still-running handler, fiber's Ctx and the permit keep until
// the handler returns; what it writes later goes nowhere. The handler
// counts as late in Stats meanwhile. The cost is a goroutine per request
// (BENCHMARKS.md at the repository root has the figures). A request whose body
// fasthttp streams (fiber.Config.StreamRequestBody) is left to the
// middleware alone: its late handler may still read the body from the
// connection's reader, which fasthttp hands to other connections once its
// handler returns.
//
// # Route and the request view
//
// Priority and key functions read the request through inbound.RequestFrom;
// Raw is the *fiber.Ctx, also available as CtxFrom(ctx). fasthttp reuses
// the buffers behind fiber's strings once a request ends, so the view's
// Method, Path, RemoteAddr and header values are copies, and the middleware
// copies rate-limit keys before the limiter keeps them; a string taken
// from the *fiber.Ctx itself (c.Get, c.Params) must be copied
// (strings.Clone) if a function keeps it.
//
// Route() is the route pattern in the neutral format ("/orders/{id}" for
// fiber's "/orders/:id", "/files/*" for "/files/*") when the middleware is
// part of the route (app.Get(path, mw.Handler, h)). Registered with app.Use
// or in a Group, it runs in a prefix route before fiber has chosen the
// endpoint, and Route() is "".
//
// # Rejections and the ErrorHandler
//
// With fiber's default ErrorHandler (which would answer text/plain), a
// rejection is sent as the net/http middleware sends it: 429, 503 or 504,
// the JSON body, Retry-After and the RateLimit fields. An app with its own
// ErrorHandler receives a *Rejection instead: errors.As finds in it a
// *fiber.Error with the status and the inbound cause (for example a
// *resilience.ConcurrencyLimitRejectedError), and Rejection.Send writes the default
// response. The response's header fields but Content-Type (Retry-After,
// the RateLimit fields) are set before the ErrorHandler runs, so they
// reach the client whatever body it writes. An error returned by the
// handler passes through unchanged.
//
// Two cases where the ErrorHandler does not decide: with ServeOnTime the
// 504 at the deadline leaves while the handler runs, so it is the default
// one (or Options.Render's); the ErrorHandler still receives the
// *Rejection when the handler returns, and what it writes then is
// discarded. And under app.Mount the middleware asks the root app (the one
// serving the request) whether its ErrorHandler is fiber's default: if it
// is, rejections are written as the default response even in a mounted
// app with an ErrorHandler of its own; give the root app an ErrorHandler
// (one that Sends a *Rejection, say) and fiber passes rejections on to the
// mounted app's.
//
// # Panics
//
// Put fiber's recover middleware before this one, as in any fiber app:
// fasthttp does not recover panics. A panic releases the permit on its way
// out. panic(http.ErrAbortHandler) closes the connection without a
// response, as net/http does.
//
// # What fasthttp cannot do
//
// The conformance suite runs this adapter against fiber's own server; these
// capabilities are declared missing there, and what happens instead is
// tested:
//
//	capability      missing because                                  instead
//	disconnect      fasthttp does not watch the connection while a   the request runs until the inbound
//	                handler runs                                     timeout ends it; its permit returns
//	streaming       fasthttp sends the response when the handler     the whole body arrives when the
//	                returns; a net/http handler's Flush does nothing handler returns; past the deadline,
//	                                                                 a complete 504
//	route (Use)     fiber chooses the endpoint after Use middleware  Route() is ""
//	on-time-504     without ServeOnTime (or for a streamed request   the handler's context ends at the
//	                body): fasthttp sends a response only when       deadline; the 504 comes when it
//	                fiber's handler returns                          returns; the permit is held till then
package resiliencefiber
