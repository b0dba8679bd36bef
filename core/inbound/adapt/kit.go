package adapt

import (
	"context"
	"net/http"
	"time"

	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/internal/kit"
)

// hooks are the entry points package inbound handed over at its init.
var hooks = kit.Get[inbound.Middleware, inbound.Options, inbound.Request, inbound.Response]()

// RouteFunc returns the route pattern a request matches, in
// inbound.Request.Route's format ("/users/{id}": no method, host or
// parameter constraint), or "" when none matches or it cannot be known
// yet. raw is Request.Raw: the framework's own request object. The
// middleware calls it at most once per request, and only when a priority
// or key function reads Request.Route. It must be safe for concurrent use.
type RouteFunc func(raw any) string

// Framework tells the middleware what it needs to know about an adapter's
// framework, once, at construction (New). Every field is optional; the
// zero Framework is plain net/http. Its functions are called concurrently
// by requests and must be safe for that.
type Framework struct {
	// Route resolves Request.Route from Request.Raw. Frameworks with
	// colon-style patterns convert them with ColonRoute. Default: the
	// *http.Request's Pattern, as PatternRoute reads it.
	Route RouteFunc

	// View fills v.Method, v.Path, v.RemoteAddr and v.Header (and
	// v.ClientIP, if the framework resolves the client itself) from raw,
	// for Execute and ExecuteInPlace. It runs only when a function may
	// read the view. Default: from raw when it is an *http.Request, else
	// nothing. Serve and Handler take these fields from the *http.Request.
	View func(raw any, v *inbound.Request)

	// SetHeader sets a header field on raw's response: Execute and
	// ExecuteInPlace use it to put the RateLimit fields on admitted
	// responses of a rate-limited route before fn runs. Nil: none are
	// set. Serve and Handler use the http.ResponseWriter.
	SetHeader func(raw any, name, value string)

	// RenderOwn is set by an adapter that answers rejections in a format
	// of its protocol's own (connect's errors) and lets Options.Render
	// restyle those answers, with Kit.Restyle: the hook is kept away from
	// inbound's JSON responses, which Render and RenderServe then return
	// as they are (the adapter reads their header fields). Options.Render
	// stays in the options (Options, Reconfigure) all the same.
	RenderOwn bool
}

// Kit is an inbound middleware as its adapter sees it: the embedded
// *inbound.Middleware is what the adapter hands its users (Handler,
// Drain, Stats, the limiters), and Kit's own methods are the entry points
// and renderers the adapter calls per request. Build it with New; it is
// safe for concurrent use, as the middleware is.
type Kit struct {
	*inbound.Middleware
	restyles bool // Framework.RenderOwn with an Options.Render
}

// New validates opts and returns the middleware for an adapter's
// framework, described by fw, or a *resilience.ConfigError naming the
// first invalid field, as inbound.New does.
func New(fw Framework, opts inbound.Options) (*Kit, error) {
	m, err := hooks.New(kit.Framework[inbound.Request]{Route: fw.Route, View: fw.View, SetHeader: fw.SetHeader, RenderOwn: fw.RenderOwn}, opts)
	if err != nil {
		return nil, err
	}
	return &Kit{Middleware: m, restyles: fw.RenderOwn && opts.Render != nil}, nil
}

// Continue runs the rest of a framework's chain once Serve admitted the
// request. w is the writer the handler must use (the middleware's timed
// writer when a timeout is set), r the request carrying the pipeline's
// context (r itself when nothing changed it), raw the object passed to
// Serve. Make it a static function: everything it needs is in raw.
type Continue func(w http.ResponseWriter, r *http.Request, raw any)

// Serve runs one request through the inbound pipeline for an adapter of a
// framework built on net/http (gin, echo, connect): raw is the framework's
// own request object, which becomes Request.Raw (nil means r), and next
// continues the framework's chain once the request is admitted.
//
// A rejection before the handler runs (429, 503, or the request's context
// ended while queued) is returned, not written: render it in the
// framework's own flow with RenderServe, and abort the chain. Once the
// handler has run Serve returns nil: the response is sent, including a
// 504 the timed writer sent at the deadline. The handler's panics
// propagate after its permit is returned.
func (k *Kit) Serve(w http.ResponseWriter, r *http.Request, raw any, next Continue) error {
	return hooks.Serve(k.Middleware, w, r, raw, next)
}

// ServeAnswering is Serve for an adapter that answers a timed request's
// deadline itself, in its own protocol (connect: a DeadlineExceeded error
// in the caller's protocol, gRPC's trailers), while the handler runs on:
// answer says how, and sees the body as it is sent. deadline is the
// caller's own, read by the adapter from the request (gRPC's
// grpc-timeout, Connect-Timeout-Ms), zero for none: it bounds the wait in
// the queue and times the handler like Options.Timeout, whichever ends
// first.
//
// A streaming call (answer.Streams), and every call over HTTP/2, runs the
// middleware and the handler on a goroutine of its own (see Go), so that
// ServeAnswering returns once the answer is out, and net/http ends the
// response, while the handler keeps its permit until it returns. It then
// returns nil and the adapter must not touch w or r again. A call over
// HTTP/1 that does not stream runs on the caller's goroutine, as under
// Serve: its answer goes out whole (Content-Length, Connection: close)
// while the handler runs on, and ServeAnswering returns nil when the
// handler does. A response the handler had committed that cannot be ended
// (a write was under way, or answer.End refused) is aborted:
// ServeAnswering panics with http.ErrAbortHandler. Otherwise it behaves as
// Serve: a rejection is returned for the adapter to render on w, and the
// handler's panics propagate; one after a detached call's answer is
// logged. An untimed request (no timeout, no pipeline, zero deadline) is
// served as by Serve, on the caller's goroutine.
func (k *Kit) ServeAnswering(w http.ResponseWriter, r *http.Request, raw any, next Continue, deadline time.Time, answer DeadlineAnswer) error {
	var a kit.DeadlineAnswer
	if answer != nil {
		a = answer
	}
	return hooks.ServeAnswering(k.Middleware, w, r, raw, next, deadline, a)
}

// DeadlineAnswer is how an adapter whose protocol has its own way to fail
// a call answers a deadline, given to ServeAnswering: connect answers
// DeadlineExceeded in the caller's protocol and ends a stream with gRPC's
// trailers or an end-of-stream message. Its methods are called with the
// request's timed writer locked, on the deadline's goroutine or the
// handler's, never at the same time; they must not block on the handler.
type DeadlineAnswer interface {
	// Answer writes the whole answer on w, to which nothing of the
	// handler's was sent (over HTTP/1, Connection: close is set on it
	// already: the late handler keeps the connection's request). cause is
	// the handler's context's: the middleware's
	// *resilience.TimeoutRejectedError, context.DeadlineExceeded for the
	// caller's deadline, or a custom pipeline's timeout.
	Answer(w http.ResponseWriter, cause error)
	// End ends, on w, a response the handler committed, and reports
	// whether it could (connect: only between two messages); if not, the
	// response is aborted. No write of the handler's is under way.
	End(w http.ResponseWriter, cause error) bool
	// Sent shows the answerer each part of the body as it goes to w, in
	// order, so that End knows where the body stands. It must not keep p.
	Sent(p []byte)
	// Streams reports whether the handler may commit the response before
	// it returns (a streaming call). Over HTTP/1 a call that does not is
	// served on the caller's goroutine, and its Answer is sent whole, with
	// Content-Length: complete while the handler runs on.
	Streams() bool
}

// Execute runs fn through the inbound pipeline, for an adapter of a
// framework not built on net/http, when its response can only go out once
// fn returns: raw is the framework's own request object (Request.Raw, and
// what Framework.View and Framework.Route read). fn gets ctx, ending at
// the timeout (under a custom pipeline, the pipeline's context).
//
// It returns fn's error, or a rejection to pass to Render: a
// *resilience.RateLimitRejectedError, a
// *resilience.ConcurrencyLimitRejectedError, the context's error when ctx
// ended while queued, or a *resilience.TimeoutRejectedError when the
// timeout fired before fn returned, whatever fn returned. fn's panics
// propagate after its permit is returned. To answer at the deadline while
// fn runs on, use ExecuteInPlace.
func (k *Kit) Execute(ctx context.Context, raw any, fn func(ctx context.Context) error) error {
	return hooks.Execute(k.Middleware, ctx, raw, fn)
}

// ExecuteInPlace is Execute that answers at the deadline, for a framework
// not on net/http that owns the handler's goroutine: fn runs on the
// caller's goroutine, because the framework recycles its request object
// as soon as the adapter's handler returns (fiber pools its Ctx), and the
// 504 is sent by a layer below the framework that can answer for the
// request while fn runs on (a fasthttp handler wrapping the framework's,
// which calls RequestCtx.TimeoutErrorWithResponse).
//
// When the deadline (the timeout, an earlier deadline of ctx, or a
// timeout strategy of a custom pipeline) passes before fn returns,
// expired is called once, on a goroutine of its own, with the error to
// pass to Render; from then until fn returns the request counts as late
// in Stats, and it keeps its permit. expired must not wait for fn; it has
// returned by the time ExecuteInPlace returns, so the adapter may then
// reuse what expired reads. ExecuteInPlace itself returns when fn
// returns, like Execute (with the *resilience.TimeoutRejectedError when
// the timeout fired). A nil expired makes it Execute.
func (k *Kit) ExecuteInPlace(ctx context.Context, raw any, fn func(ctx context.Context) error, expired func(cause error)) error {
	return hooks.ExecuteInPlace(k.Middleware, ctx, raw, fn, expired)
}

// Render maps an error returned by Execute (or Serve) to the response to
// send, through Options.Render when set. ok is false when nothing must be
// sent: the request's context was cancelled (the client disconnected). A
// hook's response with a status outside 100–999, or a hook that panics
// (reported as event.HookPanic), gives the default response. Once the
// middleware drains, and for a 503 shutting-down, the response carries
// "Connection: close" (ClosesConnection).
func (k *Kit) Render(err error) (resp inbound.Response, ok bool) {
	return hooks.Render(k.Middleware, err)
}

// RenderServe is Render for a rejection Serve returned, with w and r as
// passed to Serve. It differs when the request's context ended while it
// was queued, where Render has nothing to send: a client still there,
// whose context the server ended (a BaseContext cancelled at shutdown),
// gets the 503 shutting-down; a client that left gets nothing, and ok is
// false: the adapter then drops the connection with nothing written
// (panic(http.ErrAbortHandler) once the framework's state is restored),
// as Handler does, rather than let net/http send an implicit empty 200.
func (k *Kit) RenderServe(w http.ResponseWriter, r *http.Request, err error) (inbound.Response, bool) {
	return hooks.RenderServe(k.Middleware, w, r, err)
}

// CapacityRetryAfter is the retry advice of the middleware's capacity
// rejections, Options.RetryAfter resolved: inbound.DefaultRetryAfter for
// 0, and 0 (no advice) for a negative value. The RPC adapters send it as
// their protocols' retry advice (RetryInfo, grpc-retry-pushback-ms), so
// that it says what the HTTP adapters' Retry-After says.
func (k *Kit) CapacityRetryAfter() time.Duration { return hooks.CapacityRetryAfter(k.Middleware) }

// Timed reports whether a deadline can answer for a handler:
// Options.Timeout is set, or a custom Pipeline runs the requests (a
// timeout strategy in it may end them). Then Serve hands the chain the
// timed writer, and ExecuteInPlace answers at the deadline; otherwise
// ExecuteInPlace is Execute and a passing deadline is the handler's to
// answer. An adapter that prepares for the deadline (a writer to install,
// a goroutine to run on) asks here, never re-reading Options, so that it
// decides as the middleware does.
func (k *Kit) Timed() bool { return hooks.Timed(k.Middleware) }

// ClosesConnection reports whether the answer to err should end its
// connection: once Drain has started, and for a 503 shutting-down. Render
// sets "Connection: close" on such answers already; an adapter that
// writes answers of its own (connect's errors) sets the field when this
// is true.
func (k *Kit) ClosesConnection(err error) bool { return hooks.ClosesConnection(k.Middleware, err) }

// RateLimitFields reports whether admitted responses carry RateLimit
// header fields: a rate limit is set and Options.RateLimitHeaders is not
// inbound.RateLimitHeadersOff. An adapter that copies the fields Execute
// set (SetHeader) onto a response of its own asks here once.
func (k *Kit) RateLimitFields() bool { return hooks.RateLimitFields(k.Middleware) }

// Answered reports whether the middleware answered a request at its
// deadline: w is the writer Serve passed to the Continue, and the answer
// is true if the middleware sent the 504 there, or cut the response the
// handler had committed. An adapter asks once Serve has returned, on the
// request's goroutine, to keep its framework from writing a second
// response (mark it committed, refuse later writes); from then on the
// middleware writes nothing more. It is false for a writer Serve did not
// time (no timeout, or a hijacked connection) and for a request the
// handler answered in time.
func Answered(w http.ResponseWriter) bool { return hooks.Answered(w) }

// WriteResponse sends resp on w, with its Content-Length: what Handler
// sends for a rejection, for an adapter on net/http to send the Response
// Render or RenderServe returned.
func WriteResponse(w http.ResponseWriter, resp inbound.Response) { hooks.WriteResponse(w, resp) }

// DetachHTTP2 returns h, a framework's router whose adapter uses Serve, so
// that each HTTP/2 request runs on a goroutine of its own: ServeHTTP then
// returns once the 504 sent at the deadline is out, and HTTP/2 ends its
// stream cleanly while the late handler runs on, as Handler does by
// itself. Without it, under Serve the stream is reset after the complete
// 504 (HTTP/2 ends a stream only when ServeHTTP returns, and the framework
// owns that call). The gin and echo adapters detach each timed HTTP/2
// request themselves, around the rest of the chain, on a copy of the
// framework's context; echo's Router offers DetachHTTP2 for an
// application whose context echo's adapter cannot copy. HTTP/1 requests
// pass through; an HTTP/2 request costs a goroutine and a few
// allocations. A timed HTTP/2 request under Serve without it is logged,
// once per middleware, to the server's ErrorLog.
func DetachHTTP2(h http.Handler) http.Handler { return hooks.DetachHTTP2(h) }

// Detached reports whether w writes to the writer of a request DetachHTTP2
// (or Handler) runs detached, directly or through writers that Unwrap:
// for an adapter that detaches a timed HTTP/2 request itself, so that a
// router already under DetachHTTP2 is not detached twice.
func Detached(w http.ResponseWriter) bool { return hooks.Detached(w) }

// NewContext returns a copy of ctx carrying r as the request view, as the
// middleware puts it there: for testing a priority or key function, or a
// custom pipeline's strategy, without a server. r.Route() of a view built
// this way is "".
func NewContext(ctx context.Context, r *inbound.Request) context.Context {
	return hooks.NewContext(ctx, r)
}
