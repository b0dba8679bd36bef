// Package resiliencegrpc sheds load in front of grpc-go services
// (google.golang.org/grpc): the inbound pipeline (rate limit → concurrency
// limiter with its priority queue, fixed or adaptive → timeout) for unary
// and streaming RPCs, with rejections sent as gRPC statuses that carry
// google.rpc error details and the retry pushback grpc-go's retry policy
// honours.
//
//	mw, err := resiliencegrpc.New(inbound.Options{
//		Timeout:     5 * time.Second,
//		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 50, QueueTimeout: 500 * time.Millisecond},
//	})
//	s := grpc.NewServer()
//	pb.RegisterGreeterServer(mw.Registrar(s), impl)
//	healthpb.RegisterHealthServer(s, health) // outside: never shed
//	...
//	mw.GracefulStop(ctx, s) // at shutdown
//
// # Where it sheds
//
// Registrar wraps the method and stream handlers of the services
// registered through it. grpc-go decodes a unary request message inside
// the generated method handler, before any unary interceptor runs; the
// wrapper admits the call first and only then lets the handler decode, so
// a shed call costs no decoding and never reaches the server's unary
// interceptors (auth, logging, validation). A stream is admitted before
// its first message and holds its permit until its handler returns.
// UnaryInterceptor and StreamInterceptor offer the same pipeline as
// interceptors, for servers whose registration cannot be wrapped; there a
// shed unary call has been decoded already.
//
// tap.ServerInHandle is not used: it runs on the connection's reader
// goroutine, so it cannot queue without stalling every stream of the
// connection, and the status it returns goes out without trailers, so it
// could not carry the retry pushback. Admission happens on the call's own
// goroutine instead.
//
// # Codes
//
// Every rejection carries a google.rpc.ErrorInfo detail (domain
// "resilience", reason the inbound code, metadata "reason" the limiter's
// reason) and, when a retry is sensible, a google.rpc.RetryInfo detail,
// the grpc-retry-pushback-ms trailer (a grpc-go client's retry policy
// waits what it says) and the retry-after trailer of inbound's 503s and
// 429s. Options.RetryAfter sets the capacity advice as for the
// HTTP adapters (0 is a second; a negative value sends none of the
// three). Messages are constant and never carry internal error text.
//
//	situation                            code                ErrorInfo reason / reason       RetryInfo, pushback, retry-after
//	queue full                           UNAVAILABLE         BULKHEAD_FULL / full            1 s, 1000, 1 (Options.RetryAfter)
//	waited QueueTimeout                  UNAVAILABLE         BULKHEAD_FULL / queue-timeout   1 s, 1000, 1 (Options.RetryAfter)
//	evicted by the overflow policy       UNAVAILABLE         BULKHEAD_FULL / dropped         1 s, 1000, 1 (Options.RetryAfter)
//	draining (GracefulStop, Drain)       UNAVAILABLE         BULKHEAD_FULL / shutting-down   none, -1 (do not retry here), none
//	rate limit exceeded                  RESOURCE_EXHAUSTED  RATE_LIMITED                    the limiter's wait in all three (pushback -1 past the caller's deadline)
//	handler past the deadline            DEADLINE_EXCEEDED   TIMEOUT                         none
//	caller's deadline passed (queued)    DEADLINE_EXCEEDED   TIMEOUT                         none, -1 (when it beats grpc-go's reset; see Deadlines)
//	deadline already expired on arrival  grpc-go answers DEADLINE_EXCEEDED itself (see Deadlines)
//	other custom-pipeline rejection      UNAVAILABLE         REJECTED                        1 s, 1000, 1 (Options.RetryAfter)
//	custom-pipeline error                INTERNAL            INTERNAL                        none
//	client cancelled while queued        CANCELLED (nobody reads it)
//
// On a rate-limited method the RateLimit fields of the call's decision
// (Options.RateLimitHeaders) go out with its answer: as response headers,
// set before the handler runs, when the call is admitted; as trailers
// when it is refused, over its rate limit (RESOURCE_EXHAUSTED) or after
// it (by the limiter, say). The rejection of a call whose handler never
// ran is trailers-only, one HEADERS frame ending the stream: header
// metadata would make grpc-go send a HEADERS frame of its own first, and
// a client's retry policy retries no other kind of answer.
//
// Read the details with status.FromError(err) and its Details method
// (*errdetails.ErrorInfo, *errdetails.RetryInfo). Options.Render is
// refused by New: it restyles HTTP responses, which gRPC does not send.
//
// # Deadlines
//
// The caller's grpc-timeout is the call's budget: grpc-go puts it on the
// call's context, so a queued call waits no longer than it and leaves the
// queue then, and a call whose deadline has already passed is never
// queued. The effective deadline is the earlier of it and Options.Timeout,
// counted from arrival unless Options.TimeoutFrom says admission. The caller's own deadline belongs to grpc-go's
// transport too: at it the transport resets the stream (RST_STREAM
// CANCEL), racing the adapter's DEADLINE_EXCEEDED (ErrorInfo TIMEOUT,
// pushback -1) for a call still queued, and it answers a call that
// arrives expired with its own DEADLINE_EXCEEDED, without the adapter's
// ErrorInfo; the caller's client reports DEADLINE_EXCEEDED either way. The adapter's
// DEADLINE_EXCEEDED with ErrorInfo TIMEOUT is the answer to
// Options.Timeout (and to a call whose context ended before grpc-go's
// transport did).
//
// With Options.Timeout (or a custom Pipeline) the handler runs on a
// goroutine of its own, because grpc-go sends a call's status only when
// its handler returns. At the deadline the handler's context ends
// (DeadlineExceeded; with Options.Timeout its cause is a
// *resilience.TimeoutRejectedError) and the call is answered
// DEADLINE_EXCEEDED at that moment, whether or not the handler watches its
// context. The handler keeps its permit until it returns (Stats counts it
// as late meanwhile); from the deadline on its sends, receives, headers
// and trailers, on the stream or through grpc.SetHeader and
// grpc.SetTrailer, fail with DEADLINE_EXCEEDED and never reach grpc-go's
// stream, and its reply is dropped. A stream past its deadline ends the
// same way. Without a timeout of the middleware the handler runs on the
// call's goroutine and the caller's deadline is enforced by its own
// client, as grpc-go does. Streams are subject to Options.Timeout like
// unary calls: front long-lived streams with a Middleware without one.
//
// # Request view
//
// Priority and rate-limit key functions read the neutral inbound.Request:
// Route and Path are the full method ("/pkg.Service/Method"), Method is
// "POST", Header the incoming metadata and RemoteAddr the peer's address,
// from which ClientIP is resolved (Options.ClientIP). Their context is
// derived from the RPC's, so metadata.FromIncomingContext, peer.FromContext
// and grpc.Method work on it, and CallFrom returns them typed in a Call.
//
// # Conformance
//
// The adapter runs the conformance suite (conformance.Run) through a
// harness that carries each of the suite's HTTP requests as a real gRPC
// call: a front net/http server opens one bidi stream per request on a
// grpc-go server whose service is registered through Registrar, and the
// suite's handler runs behind the adapter, its status, headers and writes
// sent back as response headers and messages; a refused call comes back
// as its gRPC status, read by the harness's decoder. Every case passes but
// three, declared with their reasons: request-view (Path and Route are the
// gRPC method, not an HTTP path, and gRPC has no route patterns),
// render-every-rejection (Options.Render is refused) and
// disconnect-unread-post-body (it pins a net/http gap gRPC does not
// have: a disconnect cancels the call whatever the handler read). The
// harness recovers the suite's handler panics as net/http would; grpc-go
// itself does not recover a handler's panic, and neither does the adapter.
//
// # Shutdown
//
// GracefulStop drains the middleware (queued and arriving calls get
// UNAVAILABLE shutting-down at once, running ones finish) and then stops
// the server with grpc.Server.GracefulStop, bounded by its context.
//
// # Client side
//
// NewClient returns a Client whose UnaryInterceptor and StreamInterceptor
// give grpc-go clients what outbound.Transport gives net/http ones: a
// retry of UNAVAILABLE (and of RESOURCE_EXHAUSTED with a pushback) that
// draws on a budget.Budget, a client-side throttle (any
// *throttle.Throttle[T]) that refuses attempts locally with a
// *ThrottledError while the server refuses most of them, retries marked
// with grpc-previous-rpc-attempts (AttemptsMetadata) for the server to
// rank, the server's pushback honoured, and no retry whose wait would
// outlast the call's deadline. Server streams are retried until their
// first response, client and bidi streams only when they cannot be
// established. Client has the rules; the README's "Client side" compares
// it with grpc-go's own retryPolicy and retryThrottling.
package resiliencegrpc
