// Package conformance is the reusable test suite every inbound adapter
// runs to prove it sheds load the way core/inbound specifies: the same
// statuses, bodies and headers, the same queue order, the same behaviour on
// timeouts, disconnects and panics, and the same goodput under overload.
// It is a library for tests, in the manner of testing/slogtest: an adapter
// describes how to start a server with its middleware in a Harness, and
//
//	conformance.Run(t, harness)
//
// runs every case as a subtest named after it. Cases returns the list with
// an explanation each; Capabilities lists what an adapter may declare
// missing.
//
// # How the suite tests
//
// Each case starts its own loopback server through the harness, with its
// own inbound.Options and its own net/http handlers mounted behind the
// middleware, and talks to it over real TCP. Handlers are held by channel
// gates that the case opens, never by sleeps, and the case waits for states
// (a request queued, permits returned) by polling the middleware's live
// Stats with a short tick and a generous deadline, so the suite holds on a
// loaded two-core machine under the race detector. Timing assertions are
// ordering ("the 504 arrived while the handler was still held") or bounded
// margins. The last two cases are a randomized stress run that checks the
// invariants (handlers running at once never exceed the permit limit; in
// flight and queued return to zero; no goroutine outlives the run) and an
// overload run that offers 1.6 times a simulated service's capacity and
// checks goodput, admitted latency and the speed of rejections. The whole
// suite takes a few seconds, about ten under -race.
//
// A failing case prints what it checks and why that matters, then each
// failure with the file and line of the check. A case fails as soon as its
// outcome is decided: a request answered when it should have queued or
// entered the handler fails the wait at once; a handler that starts while
// the middleware's Stats count nothing in flight (the middleware is not in
// front of the handler) fails the case at once; and from a case's first
// failure on, every wait it still has stops and its open requests are
// cancelled, so later lines that say "stopped waiting" or "not waited for"
// follow from the first. Only a case that has not failed yet, whose
// outcome only time decides (a 504 or a queue timeout that never comes),
// waits its bound (10 s for a state, 20 s for a response). An adapter
// whose middleware does nothing fails every case in well under a second.
//
// # Cases
//
// In the order Run runs them (Case.Explanation has the details):
//
//	admit-below-limit              below PermitLimit a request runs at once
//	queue-waits-for-slot           with every permit in use a request queues, then runs
//	queue-full-rejects-at-once     a full queue answers 503 BULKHEAD_FULL reason full at once
//	queue-timeout                  a request queued past QueueTimeout gets 503 reason queue-timeout
//	timeout-504                    a handler past Timeout: context cancelled, client gets the 504 JSON
//	health-before-middleware       a health route before the middleware is never shed
//	priority-order                 a freed slot goes to the lowest Priority, then arrival order
//	overflow-reject-new            reject-new: a full queue rejects the newcomer, whatever its priority
//	overflow-drop-oldest           drop-oldest: the longest waiter is evicted with reason dropped
//	overflow-drop-lowest-priority  drop-lowest-priority: a newcomer that outranks evicts the lowest
//	running-never-interrupted      overflow policies never interrupt a running request
//	fair-order                     with a Flow function, freed slots go across flows in turn, FIFO within a flow
//	fair-shedding                  with a Flow function, a full queue sheds from the flow with the most queued
//	request-view                   priority and key functions see the request's method, path, route, IP, headers
//	rate-limit-per-key             the rate limit is per key: 429 for one client, others go on
//	rate-limit-headers             admitted responses carry the RateLimit fields, counting down
//	rate-limit-429-vs-503          over quota is 429, over capacity is 503
//	retry-after-503s               every capacity 503 has Retry-After (1 s default, Options.RetryAfter)
//	retry-after-shutting-down      the 503 shutting-down has Retry-After too
//	rate-limit-headers-on-503      a 503 on a rate-limited route has the RateLimit fields
//	shutting-down-closes-connection  the 503 shutting-down has Connection: close and ends its connection
//	timeout-ignored-context        a handler that ignores its context still gets its client a 504 on time
//	timeout-late-writes-discarded  after the 504, late writes and headers are dropped without a race
//	timeout-nested-pipeline        a pipeline run inside the handler observes the inbound deadline
//	timeout-http2-clean-end        over HTTP/2 the 504 is on time and its stream ends cleanly (no reset)
//	disconnect-while-queued        a client gone while queued frees its queue place at once
//	disconnect-while-running       a client gone while its handler runs cancels its context
//	disconnect-unread-post-body    net/http gap, pinned: a disconnect is noticed once the body is read
//	gone-client-never-200          a client gone while queued or before a silent handler returns never reads a 2xx
//	panic-frees-permit             a panicking handler gives no 200 and frees its permit
//	panic-abort-handler            http.ErrAbortHandler aborts the connection and frees the permit
//	panic-after-timeout            a panic after the 504 neither crashes the server nor keeps the permit
//	sse-flush                      server-sent events flush through the middleware
//	streaming-deadline-aborts      a deadline after a flush aborts the response, never a fake 504
//	render-every-rejection         Options.Render shapes the 429, every 503 reason and the 504
//	stress-invariants              randomized run: the permit limit holds, nothing leaks
//	overload-goodput               under 1.6x overload goodput stays high and rejections are fast
//	adaptive-sheds-and-recovers    the adaptive limiter sheds under overload and recovers
//
// # Writing an adapter for a new framework
//
// An adapter does three things ("Writing an adapter" in docs/guide.md
// says how): it describes its framework to adapt.New (how to
// resolve the route, how to fill the request view), it runs the inbound
// pipeline around the rest of the chain through the entry point that fits
// (Middleware.Handler, Serve, ExecuteInPlace or Execute),
// and it renders returned rejections with Middleware.Render through the
// framework's own response. Then, in the adapter's package, add a test:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{
//			Name: "myframework",
//			Start: func(cfg conformance.Config) (*conformance.Server, error) {
//				mw, err := myadapter.New(cfg.Options) // the adapter under test
//				if err != nil {
//					return nil, err // a rejected configuration fails the case
//				}
//				app := myframework.New()
//				// The health route first, outside the middleware.
//				app.Get(conformance.HealthPath, myframework.WrapHTTP(cfg.Health))
//				// Everything else behind it: every method, every path,
//				// and the route the request-view case checks.
//				app.Use(mw.Handler)
//				app.Any("/*", myframework.WrapHTTP(cfg.Handler))
//				app.Any("/route/:id", myframework.WrapHTTP(cfg.Handler)) // conformance.RoutePattern
//				return conformance.NewHTTPServer(app, mw.Inbound().Stats)
//			},
//		})
//	}
//
// Start receives a Config per case. Mount Config.Handler behind the
// middleware for every method and path (the suite's routes are all below
// "/"), once more at RoutePattern ("/route/{id}", written in the
// framework's syntax) so that the request-view case can check
// inbound.Request.Route, and Config.Health at HealthPath in front of it, the way a user
// registers a health route before the middleware. The suite writes its
// handlers for net/http; a framework that has its own handler type mounts
// them the way it mounts any net/http handler (most have a wrapper). A
// framework built on net/http hands its router to NewHTTPServer, which
// serves it on 127.0.0.1 with a plain http.Server. A framework with its
// own server (fasthttp, say) listens on 127.0.0.1:0 itself and returns a
// Server with the base URL, a Stats function and a Close that shuts it
// down. Stats must read the adapter's live counters: an adapter built on
// inbound.Middleware passes its Stats method.
//
// An adapter whose rejections are not inbound's JSON bodies but a
// protocol's own errors (Connect's, say) sets Harness.DecodeRejection to
// read them: the suite still checks the status and, through the decoder,
// the code, reason and message of every rejection. Without one,
// DecodeJSONRejection checks inbound's body field by field.
//
// Run the test with -race; goleak (go.uber.org/goleak) in the package's
// TestMain catches goroutines left behind. Add -v to see every case and
// the stress and overload figures.
//
// # When the framework cannot do something
//
// Some frameworks cannot do everything net/http can: fasthttp does not
// notice a client that disconnects while a handler runs, a framework that
// buffers responses cannot stream, and one whose middleware runs before
// routing without a way to look the route up cannot report
// Request.Route (CapRoute). Declare the capability missing,
// with the reason users will read:
//
//	Missing: map[conformance.Capability]string{
//		conformance.CapDisconnect: "fasthttp does not report a closed connection to a running handler",
//	},
//
// The cases that need it are not skipped: each runs its pinned variant,
// which asserts what the adapter does instead (for a disconnect, that the
// inbound timeout ends the request and its permit still comes back). The
// documented gap is then tested like everything else and cannot widen
// silently. Put the same reason in the adapter's documentation.
//
// A case that fails because of a bug not fixed yet goes in KnownFailing
// with a reason (an issue link):
//
//	KnownFailing: map[string]string{
//		"sse-flush": "https://example.com/issues/42: the writer wrapper hides Flush",
//	},
//
// The case still runs. While it fails, it is reported as skipped with its
// failures; once it passes, the run fails and asks for the entry to be
// removed, so the list never outlives the bug. An unknown case name or
// capability in either map fails the run.
package conformance
