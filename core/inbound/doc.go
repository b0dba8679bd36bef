// Package inbound is the server side of resilience: it puts the inbound
// pipeline in front of request handlers, independent of the HTTP framework,
// and ships the plain net/http middleware.
//
// Every request goes through, in this order:
//
//	rate limit (optional, per key, 429) → concurrency limiter (cap + short priority queue, 503) → timeout (504)
//
// Configured as Timeout 5s, PermitLimit 200, QueueLimit 100, QueueTimeout
// 500ms:
//
//	situation                                  response
//	fewer than 200 in flight                   runs at once
//	200 in flight, fewer than 100 waiting      waits for a slot, at most 500 ms
//	queue full                                 503 at once, code BULKHEAD_FULL, reason full
//	waited 500 ms without a slot               503, BULKHEAD_FULL, reason queue-timeout
//	evicted from the queue by overflow policy  503, BULKHEAD_FULL, reason dropped
//	handler runs past 5 s                      504, code TIMEOUT; the request's context ends (DeadlineExceeded; its cause a *resilience.TimeoutRejectedError)
//	client disconnects (queued or running)     context cancelled; connection aborted, nothing sent; permit or queue place freed
//	server ends the context (queued)           503, BULKHEAD_FULL, reason shutting-down (a BaseContext cancelled at shutdown)
//	Middleware.Drain called (queued or new)    503, BULKHEAD_FULL, reason shutting-down; running handlers finish
//	per-key rate limit exceeded                429, code RATE_LIMITED, Retry-After and RateLimit-* fields
//
// Rejection bodies are JSON (Content-Type: application/json), rendered
// once at start-up, and never carry internal error text:
//
//	{"statusCode":503,"error":"Service Unavailable","message":"…","code":"BULKHEAD_FULL","reason":"full"}
//
// A full bulkhead is 503, not 429: the server ran out of capacity, not the
// client out of quota. Retry-After is a whole number of seconds, rounded
// up. A rate-limited route also carries RateLimit-Limit, RateLimit-Remaining
// and RateLimit-Reset on admitted responses, or with
// RateLimitHeadersStructured the fields of
// draft-ietf-httpapi-ratelimit-headers-09 (RateLimit-Policy and RateLimit).
// Options.Render replaces the rendering.
//
// # The net/http middleware
//
// Middleware.Handler (or NewMiddleware) wraps a handler. On HTTP/1 the
// handler runs on the request's own goroutine, so its panics propagate
// unchanged (http.ErrAbortHandler keeps its identity), before or after the
// deadline. Its concurrency permit is released only when it really
// returns: a handler that ignores its context still counts against the
// cap, and Stats reports it as late. Guarantees, each tested:
//
//   - At the deadline the request's context ends (Err DeadlineExceeded,
//     context.Cause a *resilience.TimeoutRejectedError) and,
//     if the handler has not committed its response, a complete 504
//     (Content-Length; Connection: close on HTTP/1) is written and flushed
//     at that moment, even if the handler ignores its context. Its later
//     writes return http.ErrHandlerTimeout and are dropped; fields it set
//     do not leak into the 504 (its header map stays private until it
//     commits). The connection's read deadline is set to now, so a handler
//     blocked reading the body is released. On HTTP/2 (TLS or h2c) the
//     504 ends its stream cleanly (END_STREAM, no reset) at that moment,
//     and the connection's other streams go on. HTTP/2 ends a stream only
//     when ServeHTTP returns, so a timed HTTP/2 request (a Timeout, or a
//     custom Pipeline) runs on a goroutine of its own and ServeHTTP
//     returns once the 504 is out. That costs about four allocations per
//     request (BenchmarkMiddlewareLimiterTimeoutHTTP2); the handler's
//     panic still reaches ServeHTTP's caller while it waits, and one after
//     the 504 is logged to the server's ErrorLog, as net/http logs panics.
//   - Until it commits, the writer holds the handler's status and the
//     first 4 KiB of its body, as net/http's own buffer would: a handler
//     that wrote its status (or a little of its body) and then stalled
//     still gets its 504 on time. It commits on Flush, or when the body
//     passes 4 KiB; a handler that returns in time gets what it wrote,
//     with a Content-Length when it fits.
//   - A committed response cannot become a 504. At the deadline it is
//     aborted instead: the write deadline is set to now, so nothing more
//     reaches the client (HTTP/2 resets the stream at once), and when the
//     handler returns the middleware panics with http.ErrAbortHandler so
//     net/http drops the connection rather than end the response as if it
//     were whole. An outer recovering middleware should re-panic that
//     value. (net/http cannot end an HTTP/1 response early: the client
//     sees the connection drop when the late handler returns.)
//   - Flush and Hijack work through the middleware (and
//     http.ResponseController, through Unwrap). A hijacked connection is
//     no longer timed: the timer is stopped and the context no longer
//     reports the deadline.
//   - When the client disconnects, net/http cancels the request's
//     context; a queued request leaves the queue, a running one sees its
//     context end, and the permit or queue place is freed. A request that
//     has no response then (it was queued, or its timed handler returned
//     without writing) is never left to net/http's implicit empty 200:
//     the middleware panics with http.ErrAbortHandler, after everything
//     is released, so the connection is dropped with nothing written.
//     When the server ended the context instead (a BaseContext cancelled
//     at shutdown) and the client is still there, such a request gets 503
//     BULKHEAD_FULL, reason shutting-down. net/http's close notification
//     tells the two apart. A 2xx is only ever the handler's own. (Without
//     a Timeout or a custom Pipeline nothing is timed: the handler writes
//     to net/http's own writer, and one that returns without writing gets
//     net/http's implicit 200, as it would without the middleware.)
//   - Drain, called before http.Server.Shutdown, answers every queued
//     request and every new arrival with that 503 at once, and returns
//     when the running handlers have finished or its context ends.
//
// The middleware chooses its own writer state machine over
// http.TimeoutHandler because the latter buffers the whole response,
// cannot stream, and runs the handler on another goroutine, losing the
// panic's stack and the permit's tie to the handler's real end.
//
// A request admitted at once allocates nothing, with or without a Priority
// function: no request copy, context value or closure is made unless
// something needs it (a timeout, a rate limit, a custom pipeline, or a
// request that must queue). The timeout uses one timer per
// Middleware for all its requests' deadlines, kept in a list in deadline
// order, rather than a runtime timer per request; each expired request is
// answered on a goroutine of its own, so a client that does not read its
// 504 holds up nobody else. (Inside a testing/synctest bubble each request
// has a timer of its own.)
//
// # Adaptive limit
//
// Options.Adaptive replaces the fixed Concurrency stage with a
// resilience.AdaptiveLimiter: the same queue, priorities and 503s, but a
// limit that follows the service's latency (see that type for when to
// prefer it). The middleware counts each request for it by how it ended:
//
//	hit Timeout (504 sent, or a committed response aborted)   drop: overload
//	4xx response                                              ignored: the request was wrong
//	client disconnected                                       ignored: not the service's doing
//	handler panicked, or hijacked the connection              ignored
//	anything else (2xx, 3xx, 5xx)                             latency sample
//
// The status is read from the timed writer, or without a Timeout from a
// thin writer that only records it (Flush, Hijack and
// http.ResponseController still work through it). Execute, which sees no
// response, classifies by the callback's error with
// AdaptiveLimiterOptions.Classify (default resilience.DefaultClassify):
// the inbound timeout is a drop, a cancelled request is ignored. Stats
// and Middleware.AdaptiveLimiter report the live limit.
//
// # Request view and keys
//
// Rate-limit key functions, Priority functions and the strategies of a
// custom pipeline read the neutral request view (*Request: method, path,
// route pattern, headers, client IP and the framework's own request
// object, Raw) with RequestFrom(ctx). The middleware builds it only when
// one of them may run: for a rate limit on every request, for a Priority
// or Flow function only when the request finds no free permit (the
// limiter calls them only for requests that queue), under a custom
// pipeline always.
// A request admitted at once pays nothing for it. Request.Route is
// resolved on first read, once per request, in one format whatever the
// framework: "/users/{id}", "/files/*".
//
// The client IP is the connection's peer unless the peer is in
// ClientIPOptions.TrustedProxies; then X-Forwarded-For is walked from the
// right past trusted hops (ResolveClientIP). KeyByClientIP and
// KeyByHeader are ready-made key functions (a nil key is one limit shared
// by every request, as in core); IPv6 clients can be
// grouped by prefix. To test a priority or key function without a server,
// put a view in a context with NewContext.
//
// # Writing an adapter
//
// An adapter puts this pipeline in a framework's own middleware chain.
// The middleware decides everything (which stages run, whether a view is
// built, the status of every rejection); the adapter only connects the
// framework:
//
//  1. Describe the framework once, in a Framework passed to NewFor:
//     Route resolves the route pattern from the framework's request object
//     (convert colon-style patterns with ColonRoute); View, for frameworks
//     not built on net/http, fills the view's Method, Path, RemoteAddr and
//     Header; SetHeader lets Execute put the RateLimit fields on the
//     response. Each runs only when needed.
//  2. Per request, call the entry point that fits, passing the framework's
//     own request object as raw: it becomes Request.Raw, so a typed
//     accessor (ctx → *gin.Context) is one type assertion on
//     RequestFrom(ctx).Raw.
//  3. Render a returned rejection through the framework's own error flow
//     with Render: copy Status, Header and Body into the framework's
//     response (abort the chain in gin; return an *echo.HTTPError built
//     from it in echo). Render's false means the client left: send
//     nothing.
//
// Which entry point:
//
//	framework                              entry point      the 504 at the deadline
//	plain net/http, or a router taking     Handler          written by the timed writer
//	  func(http.Handler) http.Handler
//	built on net/http with its own context Serve            written by the timed writer
//	  (gin, echo, connect)
//	not on net/http, response sent when    ExecuteTimed     returned at the deadline; the
//	  the handler returns (fasthttp)                        adapter sends Render's 504 and
//	                                                        drops the handler's later writes
//	not on net/http, the handler must stay ExecuteInPlace   expired is called at the deadline;
//	  on the framework's goroutine (fiber                   a layer below the framework sends
//	  recycles its Ctx when it returns)                     Render's 504 (fasthttp's
//	                                                        TimeoutErrorWithResponse)
//	not on net/http, no early answer       Execute          returned when fn returns
//
// Serve continues the chain through a Continue, a static function that
// gets the writer to use (the timed writer when a timeout is set), the
// request carrying the pipeline's context and raw; the framework stores
// them in its own context object and calls its next handler. Rejections
// before the handler (429, 503) are returned for the adapter to render;
// once the handler ran, the response is sent and Serve returns nil.
// Answered then tells, from the writer the Continue got, whether that
// response is the middleware's own answer at the deadline, for a
// framework that keeps its own view of the response (gin's writer,
// echo's Committed) and must not write a second one.
//
// ExecuteTimed runs the handler on a goroutine of its own when a deadline
// can end it and returns at the deadline with a *resilience.TimeoutRejectedError
// while the handler runs on, holding its permit until it returns (Stats
// counts it as late). The adapter then sends Render's 504 at once and
// makes sure nothing the handler writes later leaves (with fasthttp,
// RequestCtx.TimeoutErrorWithResponse). Execute runs the handler on the
// caller's goroutine and reports the timeout when it returns.
// ExecuteInPlace keeps fn on the caller's goroutine too, but calls the
// adapter's expired function at the deadline, while fn runs on with its
// permit, so that a layer below the framework can answer on time. An
// adapter that answers a deadline itself while the handler runs on
// (connect, which ends a gRPC stream with its trailers and honours
// callers' deadlines) calls CountLate as it answers, so Stats counts the
// late handler. Every entry point runs the same stages through one
// dispatch path: the same rejections, the same events.
//
// Prove the adapter with the conformance suite
// (github.com/ylcnfrht/resilience/conformance): a test that starts the
// framework with the adapter on a loopback server for each case's
// configuration and calls conformance.Run. A framework that cannot do
// something (fasthttp cannot see a client disconnect while a handler runs;
// a router cannot know the route before routing) declares the capability
// missing in Harness.Missing with the reason, and the suite checks what
// it does instead. docs/DESIGN.md has the layering and the invariants
// every adapter keeps.
package inbound
