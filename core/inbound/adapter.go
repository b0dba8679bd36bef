package inbound

import (
	"context"
	"log"
	"net/http"
	"strings"

	resilience "github.com/ylcnfrht/resilience/core"
)

// RouteFunc returns the route pattern a request matches, in Request.Route's
// format ("/users/{id}": no method, host or parameter constraint), or ""
// when none matches or it cannot be known yet. raw is Request.Raw: the framework's own request object. The
// middleware calls it at most once per request, and only when a priority
// or key function reads Request.Route. It must be safe for concurrent use.
type RouteFunc func(raw any) string

// Framework tells the middleware what it needs to know about an adapter's
// framework, once, at construction (NewFor). Every field is optional; the
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
	// read the view. Default: from raw when it is an
	// *http.Request, else nothing. Serve and Handler take these fields
	// from the *http.Request.
	View func(raw any, v *Request)

	// SetHeader sets a header field on raw's response: Execute and
	// ExecuteInPlace use it to put the RateLimit fields on admitted
	// responses of a rate-limited route before fn runs. Nil:
	// none are set. Serve and Handler use the http.ResponseWriter.
	SetHeader func(raw any, name, value string)
}

// PatternRoute is the default RouteFunc: the Pattern of raw, an
// *http.Request routed by http.ServeMux (or a router that sets Pattern),
// converted to Request.Route's format: "GET example.com/files/{path...}"
// becomes "/files/*". It returns "" for anything else.
func PatternRoute(raw any) string {
	r, ok := raw.(*http.Request)
	if !ok {
		return ""
	}
	return muxRoute(r.Pattern)
}

// muxRoute converts a ServeMux pattern, "[METHOD ][HOST]/PATH", to the
// route format: no method or host, "{name...}" as "*", no "{$}".
func muxRoute(p string) string {
	if p == "" {
		return ""
	}
	i := strings.IndexByte(p, '/')
	if i < 0 {
		return ""
	}
	p = p[i:] // drop the method and the host
	if !strings.Contains(p, "{") {
		return p
	}
	p = strings.TrimSuffix(p, "{$}")
	if strings.HasSuffix(p, "...}") {
		if i := strings.LastIndexByte(p, '{'); i >= 0 {
			p = p[:i] + "*"
		}
	}
	return p
}

// ColonRoute converts a route pattern in the colon style of gin, echo and
// fiber to Request.Route's format: ":name" (and fiber's ":name?" and
// ":name<constraint>") becomes "{name}", and a wildcard ("*", "*name",
// fiber's "+") becomes "*". "/users/:id" gives "/users/{id}" and
// "/files/*filepath" gives "/files/*". A pattern with neither is returned
// unchanged.
func ColonRoute(pattern string) string {
	if !strings.ContainsAny(pattern, ":*+") {
		return pattern
	}
	var b strings.Builder
	b.Grow(len(pattern) + 4)
	for i := 0; i < len(pattern); {
		c := pattern[i]
		switch {
		case c == ':' && (i == 0 || pattern[i-1] == '/'):
			j := i + 1
			for j < len(pattern) && pattern[j] != '/' && pattern[j] != '<' && pattern[j] != '?' && pattern[j] != '.' && pattern[j] != '-' {
				j++
			}
			b.WriteByte('{')
			b.WriteString(pattern[i+1 : j])
			b.WriteByte('}')
			if j < len(pattern) && pattern[j] == '<' { // fiber constraint
				if k := strings.IndexByte(pattern[j:], '>'); k >= 0 {
					j += k + 1
				}
			}
			if j < len(pattern) && pattern[j] == '?' { // fiber optional
				j++
			}
			i = j
		case (c == '*' || c == '+') && (i == 0 || pattern[i-1] == '/'):
			b.WriteByte('*')
			j := i + 1
			for j < len(pattern) && pattern[j] != '/' {
				j++
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
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
// framework's own flow with Render, and abort the chain. Once the handler
// has run Serve returns nil: the response is sent, including a 504 the
// timed writer sent at the deadline. The handler's panics propagate after
// its permit is returned.
func (m *Middleware) Serve(w http.ResponseWriter, r *http.Request, raw any, next Continue) error {
	if next == nil {
		return resilience.ErrNilCallback
	}
	if raw == nil {
		raw = r
	}
	c := call{ctx: r.Context(), raw: raw, w: w, r: r, cont: next}
	return m.dispatch(&c)
}

// Execute runs fn through the inbound pipeline, for an adapter of a
// framework not built on net/http, when its response can only go out once
// fn returns: raw is the framework's own request object (Request.Raw,
// and what Framework.View and Framework.Route read). fn gets ctx, ending at
// the timeout (under a custom pipeline, the pipeline's context).
//
// It returns fn's error, or a rejection to pass to Render: a
// *resilience.RateLimitRejectedError, a *resilience.ConcurrencyLimitRejectedError,
// the context's error when ctx ended while queued, or a
// *resilience.TimeoutRejectedError when the timeout fired before fn
// returned, whatever fn returned. fn's panics propagate after its permit
// is returned. To answer at the deadline while fn runs on, use
// ExecuteInPlace.
func (m *Middleware) Execute(ctx context.Context, raw any, fn func(ctx context.Context) error) error {
	if fn == nil {
		return resilience.ErrNilCallback
	}
	c := call{ctx: ctx, raw: raw, fn: fn}
	return m.dispatch(&c)
}

// ExecuteInPlace is Execute that answers at the deadline, for a framework
// not on net/http that owns the handler's goroutine: fn runs on the
// caller's goroutine, because the framework recycles its request object as soon as the adapter's handler returns
// (fiber pools its Ctx), and the 504 is sent by a layer below the
// framework that can answer for the request while fn runs on (a fasthttp
// handler wrapping the framework's, which calls
// RequestCtx.TimeoutErrorWithResponse).
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
func (m *Middleware) ExecuteInPlace(ctx context.Context, raw any, fn func(ctx context.Context) error, expired func(cause error)) error {
	if fn == nil {
		return resilience.ErrNilCallback
	}
	// One call value, whichever way: the frame stays small, which matters
	// on the goroutine an adapter may start for each request.
	c := call{ctx: ctx, raw: raw, fn: fn}
	if m.Timed() {
		// The deadline (runFn) counts the call late and calls expired,
		// unless fn has returned.
		c.expired = expired
	}
	return m.dispatch(&c)
}

// Answered reports whether the middleware answered a request at its
// deadline: w is the writer Serve passed to the Continue, and the answer
// is true if the middleware sent the 504 there, or cut the response the
// handler had committed. An adapter asks once Serve has returned, on the
// request's goroutine, to keep its framework from writing a second
// response (mark it committed, refuse later writes); from then on the
// middleware writes nothing more. It is false for a writer Serve did not
// time (no timeout, or a hijacked connection) and for a request the
// handler answered in time.
func Answered(w http.ResponseWriter) bool {
	tw, ok := w.(*timeoutWriter)
	return ok && tw.answered
}

// RenderServe is Render for a rejection Serve returned, with w and r as
// passed to Serve. It differs when the request's context ended while it
// was queued, where Render has nothing to send: a client still there,
// whose context the server ended (a BaseContext cancelled at shutdown),
// gets the 503 shutting-down; a client that left gets nothing, and ok is
// false: the adapter then drops the connection with nothing written
// (panic(http.ErrAbortHandler) once the framework's state is restored), as
// Handler does, rather than let net/http send an implicit empty 200.
func (m *Middleware) RenderServe(w http.ResponseWriter, r *http.Request, err error) (Response, bool) {
	if resp, ok := m.Render(err); ok {
		return resp, true
	}
	if clientGone(w) {
		return Response{}, false
	}
	resp, _ := m.Render(errShuttingDown)
	return resp, true
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
	// Sent shows the answerer each part of the body as it goes to w,
	// in order, so that End knows where the body stands. It must not
	// keep p.
	Sent(p []byte)
	// Streams reports whether the handler may commit the response
	// before it returns (a streaming call). Over HTTP/1 a call that
	// does not is served on the caller's goroutine, and its Answer is
	// sent whole, with Content-Length: complete while the handler runs
	// on.
	Streams() bool
}

// LogPanic logs to the ErrorLog of the server serving r (the log
// package's default logger without one), as net/http logs a handler's
// panic: for a panic after the deadline was answered, which no one is left
// to re-raise it to.
func LogPanic(r *http.Request, format string, args ...any) {
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.ErrorLog != nil {
		srv.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}
