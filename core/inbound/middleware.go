package inbound

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/internal/deadline"
)

// Middleware runs requests through the inbound pipeline: rate limit →
// concurrency limiter (or a custom pipeline) → timeout, and renders the
// rejections. Use Handler for net/http (most callers), and Drain before
// http.Server.Shutdown; an adapter for another framework uses Serve,
// ExecuteTimed or Execute with Render (the package documentation says
// which).
//
// A Middleware is safe for concurrent use by any number of requests; one
// value may wrap several handlers, which then share its limits. Build it
// with New: the zero value is not usable. A rejected or failed request
// leaves nothing behind: its permit and queue place are returned, its
// timer stopped.
type Middleware struct {
	opts     Options
	fw       Framework
	limiter  *resilience.ConcurrencyLimiter
	adaptive *resilience.AdaptiveLimiter
	rate     *resilience.RateLimiter
	pipeline *resilience.Pipeline[struct{}]
	gate     gate // the concurrency stage; nil without one
	// plain is the fixed limiter when it is the only stage (no rate
	// limit or timeout): Handler and Serve take a free permit from it
	// directly, without building a call for dispatch.
	plain *resilience.ConcurrencyLimiter

	// queueView: a request that does not find a free permit needs the
	// view (a Priority function, or a custom pipeline's strategies, may
	// read it).
	queueView bool
	// measure: the adaptive limiter counts each request by its outcome.
	measure  bool
	classify resilience.Classifier

	timeout    time.Duration
	timeoutErr *resilience.TimeoutRejectedError // shared: constant per middleware

	rateTel, timeoutTel resilience.Telemetry
	hookTel             resilience.Telemetry // event.HookPanic of Options.Render

	policyValue []string // RateLimit-Policy, constant per middleware
	policyName  string   // the policy name as a structured-field string

	deadlines deadline.List // the one timer for every request's deadline

	late      atomic.Int64
	lateTotal atomic.Uint64

	draining atomic.Bool // Drain was called: every arrival is refused

	requests requestCounters // Stats.Requests
}

// New validates opts and returns the middleware for plain net/http (or a
// framework described by the zero Framework), or a
// *resilience.ConfigError naming the first invalid field (for example
// "Options.Timeout" or "ConcurrencyLimiterOptions.PermitLimit").
func New(opts Options) (*Middleware, error) { return NewFor(Framework{}, opts) }

// NewFor is New for an adapter: fw says how to resolve the route and
// build the request view from its framework's request object.
func NewFor(fw Framework, opts Options) (*Middleware, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	name := opts.Name
	if name == "" {
		name = "inbound"
	}
	if fw.Route == nil {
		fw.Route = PatternRoute
	}
	m := &Middleware{opts: opts, fw: fw, pipeline: opts.Pipeline, timeout: opts.Timeout}
	m.hookTel = resilience.NewTelemetry(name, "Render", opts.Listener)
	switch {
	case opts.Concurrency != nil:
		l, err := resilience.NewConcurrencyLimiter(*opts.Concurrency)
		if err != nil {
			return nil, err
		}
		m.limiter = l
		m.gate = &fixedGate{l: l, tel: resilience.NewTelemetry(name, l.StrategyName(), opts.Listener)}
		m.queueView = opts.Concurrency.Priority != nil
	case opts.Adaptive != nil:
		a := *opts.Adaptive
		m.classify = classifyWith(a.Classify)
		a.Classify = m.classify
		l, err := resilience.NewAdaptiveLimiter(a)
		if err != nil {
			return nil, err
		}
		m.adaptive = l
		m.gate = &adaptiveGate{l: l, tel: resilience.NewTelemetry(name, l.StrategyName(), opts.Listener)}
		m.queueView = a.Priority != nil
		m.measure = true
	case opts.Pipeline != nil:
		m.gate = &pipelineGate{p: opts.Pipeline, statsFn: opts.LimiterStats}
		m.queueView = true
	}
	if opts.RateLimit != nil {
		rl, err := resilience.NewRateLimiter(*opts.RateLimit)
		if err != nil {
			return nil, err
		}
		m.rate = rl
		m.rateTel = resilience.NewTelemetry(name, rl.StrategyName(), opts.Listener)
		m.policyName = structuredName(rl.Policy().Name)
		m.policyValue = []string{policyField(rl.Policy())}
	}
	if m.limiter != nil && m.rate == nil && opts.Timeout == 0 {
		m.plain = m.limiter
	}
	if opts.Timeout > 0 {
		m.timeoutErr = &resilience.TimeoutRejectedError{Timeout: opts.Timeout}
		m.timeoutTel = resilience.NewTelemetry(name, "Timeout", opts.Listener)
	}
	return m, nil
}

// NewMiddleware is New for code that only needs the net/http middleware
// function, as routers expect it (chi's Use, for example).
func NewMiddleware(opts Options) (func(http.Handler) http.Handler, error) {
	m, err := New(opts)
	if err != nil {
		return nil, err
	}
	return m.Handler, nil
}

// Limiter returns the concurrency limiter built from Options.Concurrency
// (to change its limit at run time), or nil.
func (m *Middleware) Limiter() *resilience.ConcurrencyLimiter { return m.limiter }

// Timed reports whether a deadline can answer for a handler: Options.Timeout
// is set, or a custom Pipeline runs the requests (a timeout strategy in it
// may end them). Then Serve hands the chain the timed writer, and
// ExecuteTimed and ExecuteInPlace answer at the deadline; otherwise they
// are Execute and a passing deadline is the handler's to answer. An
// adapter that prepares for the deadline (a writer to install, a goroutine
// to run on) asks here, never re-reading Options, so that it decides as
// the middleware does.
func (m *Middleware) Timed() bool { return m.timeout > 0 || m.pipeline != nil }

// RateLimiter returns the rate limiter built from Options.RateLimit, or nil.
func (m *Middleware) RateLimiter() *resilience.RateLimiter { return m.rate }

// Handler returns next wrapped in the inbound pipeline, for plain
// net/http: the view's Raw is the *http.Request and its Route comes from
// the Framework's RouteFunc (PatternRoute by default, which needs the
// middleware inside the ServeMux, around each registered handler, where
// the request's Pattern is set). See the package documentation for what
// the wrapped handler guarantees.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return &handler{m: m, next: next}
}

type handler struct {
	m    *Middleware
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if l := h.m.plain; l != nil && !h.m.draining.Load() && r.Context().Err() == nil && l.TryAcquire() {
		// What dispatch does for it (runHeld, then an untimed runHTTP),
		// without building a call: the path most requests take.
		defer l.Release()
		h.next.ServeHTTP(w, r)
		h.m.requests.admitted.Add(1)
		return
	}
	if r.ProtoMajor >= 2 && h.m.Timed() {
		h.serveDetached(w, r)
		return
	}
	h.serveHTTP(w, r)
}

func (h *handler) serveHTTP(w http.ResponseWriter, r *http.Request) {
	c := call{ctx: r.Context(), raw: r, w: w, r: r, next: h.next}
	if err := h.m.dispatch(&c); err != nil {
		h.m.rejectHTTP(w, r, err)
	}
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
	if l := m.plain; l != nil && !m.draining.Load() && r.Context().Err() == nil && l.TryAcquire() {
		// Handler's shortcut: what dispatch does for it (runHeld, then an
		// untimed runHTTP), without building a call.
		defer l.Release()
		next(w, r, raw)
		m.requests.admitted.Add(1)
		return nil
	}
	c := call{ctx: r.Context(), raw: raw, w: w, r: r, cont: next}
	return m.dispatch(&c)
}

// takeRate applies the rate limit to the request in x, with core's
// events, and records the decision on its view, and on the response's
// header when admitted.
func (m *Middleware) takeRate(x *exchange) error {
	d, err := m.rate.Take(x.viewCtx(), m.rateTel) // core's decision and events
	if !d.Allowed {
		return err
	}
	if err != nil {
		return nil // the store failed open: no numbers to report, no headers
	}
	v := &x.vc.req
	v.rateLimited = true
	v.rateDecision = d
	if m.opts.RateLimitHeaders == RateLimitHeadersOff {
		return nil
	}
	switch {
	case x.c.w != nil:
		m.setRateLimitFields(x.c.w.Header(), d.Limit, d.Remaining, d.Reset)
	case m.fw.SetHeader != nil:
		h := make(http.Header, 3)
		m.setRateLimitFields(h, d.Limit, d.Remaining, d.Reset)
		for k, vs := range h {
			m.fw.SetHeader(x.c.raw, k, vs[0])
		}
	}
	return nil
}

// reportHookPanic, deferred around a user's hook that runs for one request
// alone, emits event.HookPanic for a panic passing through and lets it go
// on, with the same value, to that request (see the core package
// documentation, User hooks).
func reportHookPanic(ctx context.Context, tel resilience.Telemetry, hook string) {
	if v := recover(); v != nil {
		tel.Emit(ctx, event.Event{Name: event.HookPanic, Reason: hook, Err: &resilience.HookPanicError{Hook: hook, Value: v}})
		panic(v)
	}
}
