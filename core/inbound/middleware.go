package inbound

import (
	"net/http"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/internal/deadline"
)

// Middleware runs requests through the inbound pipeline: rate limit →
// concurrency limiter (or a custom pipeline) → timeout, and renders the
// rejections. Use Handler for net/http (most callers), and Drain before
// http.Server.Shutdown; an adapter for another framework uses Serve,
// ExecuteInPlace or Execute with Render ("Writing an adapter" in
// docs/guide.md says which).
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
	gate     *gate // the fixed or adaptive limiter; nil without one

	// queueView: a request that does not find a free permit needs the
	// view (a Priority or Flow function, or a custom pipeline's
	// strategies, may read it).
	queueView bool
	// measure: the adaptive limiter counts each request by its outcome.
	measure  bool
	classify resilience.Classifier

	timeout    time.Duration
	timeoutErr *resilience.TimeoutRejectedError // shared: constant per middleware

	rateTel, timeoutTel resilience.Telemetry
	hookTel             resilience.Telemetry // event.HookPanic of Options.Render

	capacity capacityResponses // the 503s, with Options.RetryAfter

	policyValue []string // RateLimit-Policy, constant per middleware
	policyName  string   // the policy name as a structured-field string

	deadlines deadline.List // the one timer for every request's deadline

	late      atomic.Int64
	lateTotal atomic.Uint64

	draining atomic.Bool // Drain was called: every arrival is refused

	requests requestCounters // Stats.RequestCounts
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
	containHooks(&opts, name)
	m := &Middleware{opts: opts, fw: fw, pipeline: opts.Pipeline, timeout: opts.Timeout}
	m.hookTel = resilience.NewTelemetry(name, "Render", opts.Listener)
	m.capacity = newCapacityResponses(opts.RetryAfter)
	switch {
	case opts.Concurrency != nil:
		l, err := resilience.NewConcurrencyLimiter(*opts.Concurrency)
		if err != nil {
			return nil, err
		}
		m.limiter = l
		m.gate = &gate{fixed: l, tel: resilience.NewTelemetry(name, resilience.StrategyName(l), opts.Listener)}
		m.queueView = ranksQueued(opts.Concurrency.Priority, opts.Concurrency.Flow)
	case opts.Adaptive != nil:
		a := *opts.Adaptive
		m.classify = a.Classify
		if m.classify == nil {
			m.classify = resilience.DefaultClassify
		}
		l, err := resilience.NewAdaptiveLimiter(a)
		if err != nil {
			return nil, err
		}
		m.adaptive = l
		m.gate = &gate{adaptive: l, tel: resilience.NewTelemetry(name, resilience.StrategyName(l), opts.Listener)}
		m.queueView = ranksQueued(a.Priority, a.Flow)
		m.measure = true
	}
	if opts.RateLimit != nil {
		rl, err := resilience.NewRateLimiter(*opts.RateLimit)
		if err != nil {
			return nil, err
		}
		m.rate = rl
		m.rateTel = resilience.NewTelemetry(name, resilience.StrategyName(rl), opts.Listener)
		m.policyName = structuredName(rl.Policy().Name)
		m.policyValue = []string{policyField(rl.Policy())}
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
// ExecuteInPlace answers at the deadline; otherwise ExecuteInPlace is
// Execute and a passing deadline is the handler's to answer. An
// adapter that prepares for the deadline (a writer to install, a goroutine
// to run on) asks here, never re-reading Options, so that it decides as
// the middleware does.
func (m *Middleware) Timed() bool { return m.timeout > 0 || m.pipeline != nil }

// RateLimiter returns the rate limiter built from Options.RateLimit, or nil.
func (m *Middleware) RateLimiter() *resilience.RateLimiter { return m.rate }

// AdaptiveLimiter returns the limiter built from Options.Adaptive (its
// Stats reads the live limit for dashboards and health checks), or nil.
func (m *Middleware) AdaptiveLimiter() *resilience.AdaptiveLimiter { return m.adaptive }
