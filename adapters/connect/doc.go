// Package resilienceconnect sheds load in front of connect-go services
// (connectrpc.com/connect): the inbound pipeline (rate limit → concurrency
// limiter with its priority queue → timeout) for Connect, gRPC and gRPC-Web
// calls, unary and streaming alike, with rejections sent as errors in the
// caller's protocol.
//
//	mw, err := resilienceconnect.New(inbound.Options{
//		Timeout:     5 * time.Second,
//		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 50, QueueTimeout: 500 * time.Millisecond},
//	})
//	path, h := greetv1connect.NewGreetServiceHandler(svc, mw.HandlerOption())
//	mux.Handle(path, mw.Handler(h))
//
// # Where it sits
//
// Middleware.Handler is net/http middleware in front of the connect
// handler, not a connect interceptor, for three reasons. It admits a call
// before connect reads or decodes the request message, so a shed call
// costs no decoding (an interceptor's unary hook runs after decoding). It
// holds the permit for the handler's whole run, streams included (an
// interceptor that implements only WrapUnary leaves streams unlimited).
// And it can answer at the deadline while the handler still runs, which
// only the layer that owns the ResponseWriter can do. The procedure comes
// from the URL path and the protocol from the method and Content-Type,
// as connect's own ErrorWriter tells them; a rejection sent before any
// response is written with connect.ErrorWriter, so it is what connect
// itself would send.
// HandlerOption is optional: it records each procedure's connect.Spec when
// the handlers are built, for Call.Spec.
//
// # Codes
//
// Every rejection carries a google.rpc.ErrorInfo detail (domain
// "resilience", reason the inbound code, metadata "reason" the limiter's
// reason) and, when a retry is sensible, the advice as a
// google.rpc.RetryInfo detail and as Retry-After and
// grpc-retry-pushback-ms metadata (headers, or trailers in gRPC), so gRPC
// clients' retry policies back off. Messages are constant and never carry
// internal error text.
//
//	situation                            code               Connect unary HTTP  ErrorInfo reason / reason       retry advice
//	queue full                           Unavailable        503                 BULKHEAD_FULL / full            1 s
//	waited QueueTimeout                  Unavailable        503                 BULKHEAD_FULL / queue-timeout   1 s
//	evicted by the overflow policy       Unavailable        503                 BULKHEAD_FULL / dropped         1 s
//	draining (Inbound().Drain)           Unavailable        503                 BULKHEAD_FULL / shutting-down   1 s
//	handler past the deadline            DeadlineExceeded   504                 TIMEOUT                         none
//	caller's deadline passed (queued)    DeadlineExceeded   504                 TIMEOUT                         none
//	deadline already expired on arrival  DeadlineExceeded   504                 TIMEOUT                         none
//	rate limit exceeded                  ResourceExhausted  429                 RATE_LIMITED                    the limiter's wait, + RateLimit-* fields
//	other custom-pipeline rejection      Unavailable        503                 REJECTED                        1 s
//	custom-pipeline error                Internal           500                 INTERNAL                        none
//	malformed deadline header            InvalidArgument    400                 —                               none
//	client disconnected                  nothing is sent (the stream is aborted)
//
// Over the Connect protocol's unary HTTP mapping the statuses are 503, 504
// and 429, as with the other adapters; gRPC and gRPC-Web carry the code in
// grpc-status (trailers-only responses), Connect streaming in the
// end-of-stream message. A request in no RPC protocol (a plain GET) is
// treated as a Connect unary call, as connect's ErrorWriter does.
// Options.Render restyles the rejections sent over that unary mapping
// only, given Connect's own error response as its default; gRPC, gRPC-Web
// and Connect streaming keep their protocols' format. A call whose client
// left gets nothing: its stream is aborted rather than ended with an empty
// 200.
//
// # Deadlines
//
// A call's deadline is the earlier of the caller's (Connect-Timeout-Ms,
// grpc-timeout, parsed as connect parses them; a malformed value is
// refused with InvalidArgument, as connect's handler would) and
// Options.Timeout, counted from admission. A deadline that has already
// passed (a zero timeout) is answered DeadlineExceeded at once, without
// queueing; a queued call waits no longer than its caller's deadline.
//
// A call with a deadline runs its handler on a goroutine of its own: net/
// http ends a response, and sends gRPC's trailers, only when ServeHTTP
// returns, so answering on time while the handler keeps running needs the
// handler off the request's goroutine. At the deadline the handler's
// context ends (DeadlineExceeded; with Options.Timeout its cause is a
// *resilience.TimeoutRejectedError) and, whether or not the handler
// watches it:
//
//   - a call with nothing sent yet (every unary call) is answered
//     DeadlineExceeded at that moment;
//   - a stream that has sent whole messages is ended with the same
//     DeadlineExceeded error, ErrorInfo detail included, in its protocol:
//     gRPC trailers, a gRPC-Web trailers message or a Connect
//     end-of-stream message, each rendered by connect's ErrorWriter;
//   - a response that cannot be ended properly (a Connect unary body
//     already flushed, or a message half sent) is aborted: the stream is
//     reset, and the client sees an error, never a complete response.
//
// The handler's later writes fail with http.ErrHandlerTimeout. It keeps
// its permit until it returns; Stats counts it as late meanwhile. Its
// panics before the deadline propagate on the request's goroutine as
// without the middleware; a panic after it is logged (the server's
// ErrorLog) and the call stays answered DeadlineExceeded. A call without
// any deadline runs its handler on the request's goroutine, with the real
// writer. Streams are subject to Options.Timeout like unary calls: serve
// long-lived streams through a Middleware without one.
//
// Cost per admitted call over connect alone: one allocation (the Call)
// without a deadline; with Options.Timeout, a goroutine and eleven
// allocations (the call's state and event channel, the handler's private
// header map, the deadline's context and timer, the request carrying it),
// twelve with a caller's deadline, the price of answering on time while
// the handler keeps running.
//
// # Request view
//
// Priority and rate-limit key functions read the neutral inbound.Request
// (Route is the procedure, "/pkg.Service/Method"; for a plain HTTP route an
// outer ServeMux matched by an exact or wildcard pattern, that pattern) or,
// through CallFrom,
// the typed Call: procedure, protocol, connect.Peer, headers, and the
// connect.Spec when the handlers were built with HandlerOption.
//
// # Conformance
//
// The adapter passes the conformance suite (conformance.Run) over the
// Connect protocol's unary HTTP mapping, every case at full capability;
// the harness reads Connect's error bodies with its own
// conformance.RejectionDecoder.
package resilienceconnect
