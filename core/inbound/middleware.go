package inbound

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/internal/deadline"
)

// Middleware runs requests through the inbound pipeline: rate limit →
// concurrency limiter (or a custom pipeline) → timeout, and renders the
// rejections. Use Handler for net/http, or Execute and Render from an
// adapter for another framework.
//
// A Middleware is safe for concurrent use by any number of requests; one
// value may wrap several handlers, which then share its limits. Build it
// with New: the zero value is not usable. A rejected or failed request
// leaves nothing behind: its permit and queue place are returned, its
// timer stopped.
type Middleware struct {
	opts     Options
	limiter  *resilience.ConcurrencyLimiter
	adaptive *resilience.AdaptiveLimiter
	rate     *resilience.RateLimiter
	pipeline *resilience.Pipeline[struct{}]
	needView bool

	timeout    time.Duration
	timeoutErr *resilience.TimeoutRejectedError // shared: constant per middleware

	limTel, rateTel, timeoutTel resilience.Telemetry
	hookTel                     resilience.Telemetry // EventHookPanic of Options.Render

	policyValue []string // RateLimit-Policy, constant per middleware
	policyName  string   // the policy name as a structured-field string

	deadlines deadline.List // the one timer for every request's deadline

	late      atomic.Int64
	lateTotal atomic.Uint64
}

// New validates opts and returns the middleware, or a
// *resilience.ConfigError naming the first invalid field (for example
// "Options.Timeout" or "ConcurrencyLimiterOptions.PermitLimit").
func New(opts Options) (*Middleware, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	name := opts.Name
	if name == "" {
		name = "inbound"
	}
	m := &Middleware{opts: opts, pipeline: opts.Pipeline, timeout: opts.Timeout}
	m.hookTel = resilience.NewTelemetry(name, "Render", opts.Listener)
	if c := opts.Concurrency; c != nil {
		l, err := resilience.NewConcurrencyLimiter(*c)
		if err != nil {
			return nil, err
		}
		m.limiter = l
		m.limTel = resilience.NewTelemetry(name, l.StrategyName(), opts.Listener)
		m.needView = c.Priority != nil
	}
	if err := m.initAdaptive(name); err != nil {
		return nil, err
	}
	if opts.RateLimit != nil {
		ro := *opts.RateLimit
		if ro.Key == nil {
			ro.Key = KeyByClientIP
		}
		rl, err := resilience.NewRateLimiter(ro)
		if err != nil {
			return nil, err
		}
		m.rate = rl
		m.rateTel = resilience.NewTelemetry(name, rl.StrategyName(), opts.Listener)
		m.policyName = structuredName(rl.Policy().Name)
		m.policyValue = []string{policyField(rl.Policy())}
		m.needView = true
	}
	if m.pipeline != nil {
		m.needView = true
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

// RateLimiter returns the rate limiter built from Options.RateLimit, or nil.
func (m *Middleware) RateLimiter() *resilience.RateLimiter { return m.rate }

// Handler returns next wrapped in the inbound pipeline. See the package
// documentation for what the wrapped handler guarantees.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return &handler{m: m, next: next}
}

type handler struct {
	m    *Middleware
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor >= 2 && h.m.timedResponses() {
		h.serveDetached(w, r)
		return
	}
	h.serveHTTP(w, r)
}

func (h *handler) serveHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	ctx := r.Context()
	var view *Request
	if m.needView {
		view = newHTTPRequestView(r, &m.opts.ClientIP)
		ctx = HTTPRequest.With(ctx, view)
	}
	if m.rate != nil {
		if err := m.takeRate(ctx, view); err != nil {
			m.reject(w, err)
			return
		}
		if view.rateLimited {
			d := &view.rateDecision
			m.setRateLimitFields(w.Header(), d.Limit, d.Remaining, d.Reset)
		}
	}
	switch {
	case m.pipeline != nil:
		m.servePipeline(w, r, ctx, h.next)
	case m.adaptive != nil:
		m.serveAdaptive(w, r, ctx, h.next)
	case m.limiter != nil:
		if err := m.acquire(ctx); err != nil {
			m.reject(w, err)
			return
		}
		// Deferred, so a panicking handler frees its permit; and only when
		// the handler returns, so one that ignores its deadline still
		// counts against the cap.
		defer m.limiter.Release()
		m.serve(w, r, ctx, h.next)
	default:
		m.serve(w, r, ctx, h.next)
	}
}

// serve runs next, timed when a timeout is configured.
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, ctx context.Context, next http.Handler) {
	if m.timeout > 0 {
		m.serveTimed(w, r, ctx, next, false, nil)
		return
	}
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	next.ServeHTTP(w, r)
}

// pipelineCall carries one request through a custom pipeline.
type pipelineCall struct {
	m    *Middleware
	w    http.ResponseWriter
	r    *http.Request
	next http.Handler
	ran  atomic.Bool
}

// errHandlerRan is what a second call of the callback returns: a retry or
// hedging strategy in a custom inbound pipeline must not run the handler
// again, since its response is already under way.
var errHandlerRan = errors.New("inbound: the handler already ran for this request")

func (c *pipelineCall) run(ctx context.Context) (struct{}, error) {
	if !c.ran.CompareAndSwap(false, true) {
		return struct{}{}, errHandlerRan
	}
	c.m.serveTimed(c.w, c.r, ctx, c.next, true, nil)
	// A timeout strategy in the pipeline reports its deadline (and emits
	// its event) only when the callback fails; the 504 itself was sent by
	// the timed writer.
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); isTimeout(cause) {
			return struct{}{}, cause
		}
	}
	return struct{}{}, nil
}

func (m *Middleware) servePipeline(w http.ResponseWriter, r *http.Request, ctx context.Context, next http.Handler) {
	c := &pipelineCall{m: m, w: w, r: r, next: next}
	_, err := m.pipeline.Execute(ctx, c.run)
	if err != nil && !c.ran.Load() {
		m.reject(w, err)
	}
	// An error after the handler ran (a timeout strategy reporting its
	// deadline) was already answered by the timed writer.
}

// reject renders err on w, or writes nothing if the client went away.
func (m *Middleware) reject(w http.ResponseWriter, err error) {
	if resp, ok := m.Render(err); ok {
		writeResponse(w, resp)
	}
}

// takeRate applies the rate limit and records the decision on view.
func (m *Middleware) takeRate(ctx context.Context, view *Request) error {
	d, err := m.rate.Allow(ctx)
	if err != nil {
		var se *resilience.RateLimitStoreError
		if !errors.As(err, &se) {
			return err
		}
		reason := "fail-open"
		if !d.Allowed {
			reason = "fail-closed"
		}
		m.rateTel.Emit(ctx, resilience.Event{Name: resilience.EventRateLimiterStoreError, Reason: reason, Err: err})
		if d.Allowed {
			return nil // no numbers to report: no headers
		}
		return err
	}
	if !d.Allowed {
		rej := &resilience.RateLimitRejectedError{RetryAfter: d.RetryAfter, Limit: d.Limit, Remaining: d.Remaining, Reset: d.Reset}
		m.rateTel.Emit(ctx, resilience.Event{Name: resilience.EventRateLimiterRejected, Reason: resilience.ReasonRateLimited, Duration: d.RetryAfter, Err: rej})
		return rej
	}
	view.rateLimited = true
	view.rateDecision = d
	return nil
}

// acquire takes a concurrency permit, emitting the limiter's rejections.
func (m *Middleware) acquire(ctx context.Context) error {
	err := m.limiter.Acquire(ctx)
	if err != nil && m.limTel.Enabled() && ctx.Err() == nil {
		var b *resilience.BulkheadRejectedError
		if errors.As(err, &b) {
			m.limTel.Emit(ctx, resilience.Event{Name: resilience.EventRateLimiterRejected, Reason: string(b.Reason), Err: err})
		}
	}
	return err
}

// Execute runs fn through the inbound pipeline, for adapters of
// frameworks that cannot use Handler. It resolves req.ClientIP, stores req
// in the context under HTTPRequest, applies the rate limit (recording the
// decision for RateLimitHeaders), takes a concurrency permit or runs the
// custom pipeline, and calls fn with a context that ends at the timeout.
//
// It returns fn's error, or a rejection to pass to Render: a
// *resilience.RateLimitRejectedError, a *resilience.BulkheadRejectedError,
// the context's error when the request's context ended while queued, or a
// *resilience.TimeoutRejectedError when the timeout fired before fn
// returned (whatever fn returned, so the adapter answers 504 if its
// framework has not sent the response yet). fn's panics propagate after
// the permit is returned. req may be nil.
//
// Unlike Handler, Execute cannot answer at the deadline on its own: it
// cancels fn's context, and the 504 is sent when fn returns.
func (m *Middleware) Execute(ctx context.Context, req *Request, fn func(ctx context.Context) error) error {
	if fn == nil {
		return resilience.ErrNilCallback
	}
	if req == nil {
		req = new(Request)
	}
	req.resolve(&m.opts.ClientIP)
	ctx = HTTPRequest.With(ctx, req)
	if m.rate != nil {
		if err := m.takeRate(ctx, req); err != nil {
			return err
		}
	}
	if m.pipeline != nil {
		_, err := m.pipeline.Execute(ctx, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, m.runTimeout(ctx, fn)
		})
		return err
	}
	if m.adaptive != nil {
		return m.executeAdaptive(ctx, fn)
	}
	if m.limiter != nil {
		if err := m.acquire(ctx); err != nil {
			return err
		}
		defer m.limiter.Release()
	}
	return m.runTimeout(ctx, fn)
}

func (m *Middleware) runTimeout(ctx context.Context, fn func(ctx context.Context) error) error {
	if m.timeout <= 0 {
		return fn(ctx)
	}
	tctx, cancel := context.WithTimeoutCause(ctx, m.timeout, m.timeoutErr)
	defer cancel()
	err := fn(tctx)
	if context.Cause(tctx) == error(m.timeoutErr) {
		m.timeoutTel.Emit(ctx, resilience.Event{Name: resilience.EventTimeout, Duration: m.timeout, Err: m.timeoutErr})
		return m.timeoutErr
	}
	return err
}
