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
// reason). The retry advice is a google.rpc.RetryInfo detail and
// Retry-After metadata when a wait is known, and grpc-retry-pushback-ms
// metadata saying what a retry will do: a positive number of milliseconds
// (the wait, rounded up), on which gRPC clients' retry policies wait that
// long before the next attempt, or -1 when a retry cannot succeed soon,
// on which they return the error at once. Messages are constant and never
// carry internal error text.
//
//	situation                            code               Connect unary HTTP  ErrorInfo reason / reason       RetryInfo, Retry-After  pushback
//	queue full                           Unavailable        503                 BULKHEAD_FULL / full            1 s                     1000
//	waited QueueTimeout                  Unavailable        503                 BULKHEAD_FULL / queue-timeout   1 s                     1000
//	evicted by the overflow policy       Unavailable        503                 BULKHEAD_FULL / dropped         1 s                     1000
//	draining (Inbound().Drain)           Unavailable        503                 BULKHEAD_FULL / shutting-down   none                    -1
//	caller's deadline passed (queued)    DeadlineExceeded   504                 TIMEOUT                         none                    -1
//	deadline already expired on arrival  DeadlineExceeded   504                 TIMEOUT                         none                    -1
//	rate limit exceeded                  ResourceExhausted  429                 RATE_LIMITED                    the limiter's wait      the wait (or -1, below)
//	other custom-pipeline rejection      Unavailable        503                 REJECTED                        1 s                     1000
//	custom-pipeline timeout              DeadlineExceeded   504                 TIMEOUT                         none                    none
//	custom-pipeline error                Internal           500                 INTERNAL                        none                    none
//	malformed deadline header            InvalidArgument    400                 —                               none                    none
//	handler past the deadline            DeadlineExceeded   504                 TIMEOUT                         none                    none
//	client disconnected                  nothing is sent (the stream is aborted)
//
// A rate-limited call also carries the RateLimit-* fields. A pushback of
// -1 means: draining never ends, so a retry here fails the same way; a
// deadline that passed before the handler ran is the caller's, which
// every retry shares; and a rate limit's wait longer than the caller's
// deadline (grpc-timeout, Connect-Timeout-Ms) leaves no attempt that can
// succeed in it, so the client gets RESOURCE_EXHAUSTED now rather than
// DEADLINE_EXCEEDED after sleeping (RetryInfo and Retry-After keep the
// wait, for a client that schedules the call again later).
//
// # On the wire
//
// Over gRPC on HTTP/2, every rejection made before the handler runs (all
// the rows above but the last two) is a trailers-only response: one
// HEADERS frame that ends the stream, carrying :status 200, content-type,
// grpc-status, grpc-message, grpc-status-details-bin, the pushback,
// Retry-After and RateLimit-* (and net/http's date and content-length: 0),
// with no message and no trailers. It is the only failure grpc-go's
// client retries under a retry policy, and the only one whose pushback it
// reads. (When the answer beats the client's own write of the request
// message, grpc-go's Invoke returns that write's io.EOF, code Unknown,
// instead of the status, grpc/grpc-go#7230; the attempt's retry policy
// still acts on the status.) The DeadlineExceeded of a handler still
// running at its deadline with nothing sent yet (every unary call) is
// trailers-only too: the same one HEADERS frame with END_STREAM, carrying
// grpc-status 4, its message and the TIMEOUT ErrorInfo, and no pushback
// (the call was admitted), as the grpc adapter's own deadline answer; a
// stream that sent messages gets those fields as trailers after them.
// gRPC-Web
// rejections are trailers-only responses (the fields in the HTTP headers,
// no body), and a gRPC-Web stream is ended by a trailers message;
// Connect streaming gets a 200 whose body is the end-of-stream message
// carrying the error and the metadata; the Connect protocol's unary
// mapping gets the HTTP status above, the metadata as headers and
// Connect's JSON error body. A request in no RPC protocol (a plain GET)
// is treated as a Connect unary call, as connect's ErrorWriter does.
// Options.Render restyles the rejections sent over that unary mapping
// only, given Connect's own error response as its default (a hook that
// panics, reported as event.HookPanic, or returns a status outside
// 100–999 gives that default, as under inbound); gRPC, gRPC-Web and
// Connect streaming keep their protocols' format. A call whose client
// left gets nothing: its stream is aborted rather than ended with an empty
// 200.
//
// The interop/grpc module of this repository checks all of this with
// grpc-go's own client and a raw HTTP/2 framer.
//
// # Deadlines
//
// A call's deadline is the earlier of the caller's (Connect-Timeout-Ms,
// grpc-timeout, parsed as connect parses them; a malformed value is
// refused with InvalidArgument, as connect's handler would) and
// Options.Timeout, counted from arrival unless Options.TimeoutFrom says
// admission. A deadline that has already
// passed (a zero timeout) is answered DeadlineExceeded at once, without
// queueing; a queued call waits no longer than its caller's deadline.
//
// A call with a deadline runs on inbound's deadline engine
// (adapt.Kit.ServeAnswering), on a goroutine of its own: net/http
// ends a response, and sends gRPC's trailers, only when ServeHTTP
// returns, so answering on time while the handler keeps running needs the
// handler off the request's goroutine. At the deadline the handler's
// context ends (DeadlineExceeded; with Options.Timeout its cause is a
// *resilience.TimeoutRejectedError) and, whether or not the handler
// watches it:
//
//   - a call with nothing sent yet (every unary call: up to 4 KiB written
//     and not flushed is held back) is answered
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
// Cost per admitted call over connect alone: no allocation without a
// deadline; with Options.Timeout, a goroutine and three allocations (the
// call's detached state and deadline engine, the goroutine's start, the
// request carrying the handler's context), the price of answering on time
// while the handler keeps running. A caller's deadline costs more
// (about ten), mostly connect's own context derived from the engine's.
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
