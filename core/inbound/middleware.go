package inbound

import (
	"context"
	"sync/atomic"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/internal/deadline"
)

// Middleware runs requests through the inbound pipeline: rate limit →
// concurrency limiter (or a custom pipeline) → timeout, and renders the
// rejections. Use Handler for net/http (most callers), and Drain before
// http.Server.Shutdown. An adapter for another framework reaches it
// through package adapt ("Writing an adapter" in docs/guide.md).
//
// A Middleware is safe for concurrent use by any number of requests; one
// value may wrap several handlers, which then share its limits. Build it
// with New: the zero value is not usable. A rejected or failed request
// leaves nothing behind: its permit and queue place are returned, its
// timer stopped.
type Middleware struct {
	opts     Options
	fw       framework
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

	// hasTimeout: Options.Timeout is set (fixed at New: adapters decide by it,
	// through Timed). tconf is the timeout in force and its shared error,
	// replaced whole by Reconfigure; a timed request reads it once.
	hasTimeout bool
	tconf      atomic.Pointer[timeoutConf]

	rateTel, timeoutTel resilience.Telemetry
	hookTel             resilience.Telemetry // event.HookPanic of Options.Render

	capacity capacityResponses // the 503s, with Options.RetryAfter

	policyValue atomic.Pointer[[]string] // RateLimit-Policy, replaced by Reconfigure
	policyName  string                   // the policy name as a structured-field string

	deadlines deadline.List // the one timer for every request's deadline

	late      atomic.Int64
	lateTotal atomic.Uint64
	// undetached: an HTTP/2 request under Serve without DetachHTTP2 was logged.
	undetached atomic.Bool

	// cost is the concurrency limiter's Cost function (contained), nil
	// without one: see cost.go.
	cost   func(context.Context) int
	costly atomic.Int64 // Stats.Costly

	shadow     shadowState  // Options.Shadow: shares and counts
	queueLimit atomic.Int64 // the limiter's queue, for a shadow decision

	reconf reconfState // Reconfigure: the options in force, the counts

	draining atomic.Bool // Drain was called: every arrival is refused

	requests requestCounters // Stats.RequestCounts
}

// New validates opts and returns the middleware for plain net/http (or a
// framework described by the zero Framework), or a
// *resilience.ConfigError naming the first invalid field (for example
// "Options.Timeout" or "ConcurrencyLimiterOptions.PermitLimit").
func New(opts Options) (*Middleware, error) { return newFor(framework{}, opts) }

// newFor is New for an adapter (adapt.New): fw says how to resolve the
// route and build the request view from its framework's request object.
func newFor(fw framework, opts Options) (*Middleware, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	name := opts.Name
	if name == "" {
		name = "inbound"
	}
	if fw.Route == nil {
		fw.Route = patternRoute
	}
	containHooks(&opts, name)
	m := &Middleware{opts: opts, fw: fw, pipeline: opts.Pipeline, hasTimeout: opts.Timeout > 0}
	m.tconf.Store(newTimeoutConf(m, opts.Timeout))
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
		m.queueLimit.Store(int64(opts.Concurrency.QueueLimit))
		m.cost = opts.Concurrency.Cost
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
		m.queueLimit.Store(int64(a.QueueLimit))
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
		m.policyValue.Store(&[]string{policyField(rl.Policy())})
	}
	if opts.Timeout > 0 {
		m.timeoutTel = resilience.NewTelemetry(name, "Timeout", opts.Listener)
	}
	m.shadow.set(opts.Shadow)
	m.shadow.tel = resilience.NewTelemetry(name, "Shadow", opts.Listener)
	return m, nil
}

// Limiter returns the concurrency limiter built from Options.Concurrency
// (to change its limit at run time), or nil. A limit set with its
// SetLimit is the PermitLimit Options reports, and lasts until a
// Reconfigure sets another.
func (m *Middleware) Limiter() *resilience.ConcurrencyLimiter { return m.limiter }

// timed is adapt.Kit.Timed: whether a deadline can answer for a handler
// (Options.Timeout, or a custom Pipeline whose timeout may end it).
func (m *Middleware) timed() bool { return m.hasTimeout || m.pipeline != nil }

// RateLimiter returns the rate limiter built from Options.RateLimit, or nil.
func (m *Middleware) RateLimiter() *resilience.RateLimiter { return m.rate }

// AdaptiveLimiter returns the limiter built from Options.Adaptive (its
// Stats reads the live limit for dashboards and health checks), or nil.
func (m *Middleware) AdaptiveLimiter() *resilience.AdaptiveLimiter { return m.adaptive }
