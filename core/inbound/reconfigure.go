package inbound

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// timeoutConf is a timeout in force and the error its deadline ends a
// request with, shared by every request armed under it (compared by
// identity: it tells the middleware's own timeout from a pipeline's).
// It also leads back to its middleware, so that a timed request reaches
// both through one pointer.
type timeoutConf struct {
	m   *Middleware
	d   time.Duration
	err *resilience.TimeoutRejectedError // nil without a timeout
}

func newTimeoutConf(m *Middleware, d time.Duration) *timeoutConf {
	tc := &timeoutConf{m: m, d: d}
	if d > 0 {
		tc.err = &resilience.TimeoutRejectedError{Timeout: d}
	}
	return tc
}

// cause is err as an error: nil without a timeout (or a timing not
// armed yet).
func (tc *timeoutConf) cause() error {
	if tc == nil || tc.err == nil {
		return nil
	}
	return tc.err
}

// reconfState is what Reconfigure keeps: one change at a time, the
// options in force, and how many changes were applied and refused.
type reconfState struct {
	mu      sync.Mutex              // one Reconfigure at a time
	live    atomic.Pointer[Options] // nil: the options given to New
	applied atomic.Uint64
	refused atomic.Uint64
}

// Reconfigure applies a whole new option set to a middleware while it
// serves, without a restart: for an incident (raise the limit now), a
// ramp, or a configuration file reloaded on SIGHUP (examples/server
// -config). It validates opts as New does and returns the same
// *resilience.ConfigError naming the first invalid field; a part that
// cannot change live is a *resilience.NotLiveError naming its field
// (errors.Is resilience.ErrNotLive; it also unwraps to a ConfigError with
// that field). On any error nothing changes: the old configuration stays
// wholly in force.
//
// What changes live, each part at once (a request arriving during the
// call may meet some parts changed and others not yet, never a part half
// changed):
//
//   - Timeout, for requests armed from now on (running ones keep their
//     deadline); it can change in value but not between 0 and set, since
//     adapters decide by Timed whether to prepare for a deadline.
//   - Concurrency: PermitLimit, QueueLimit, QueueTimeout, Overflow, CoDel
//     (resilience.ConcurrencyLimiter.Reconfigure). The limit becomes
//     opts' PermitLimit; Options carries the limit in force, so a change
//     that starts from it keeps a limit Limiter().SetLimit moved, while
//     options built afresh (a reloaded file) set their own. Adaptive:
//     MinLimit,
//     MaxLimit, QueueLimit, QueueTimeout, Overflow, CoDel
//     (resilience.AdaptiveLimiter.Reconfigure; the learnt limit moves into
//     the new bounds).
//   - RateLimit: PermitLimit and Window (for a token bucket, its size and
//     refill), for every key's next take.
//   - Shadow: the shares drawn by the next requests, for a ramp (100,
//     then 50, then 0).
//
// Running requests keep their permits: a lower limit admits again once
// fewer run; a smaller queue refuses its excess at once with the usual
// 503 (reason dropped, counted in RequestCounts.Dropped and emitted as
// event.ConcurrencyLimiterRejected), the worst waiters first; nothing is
// lost or answered twice.
//
// What does not change live, refused with a *resilience.NotLiveError:
// adding or removing a stage (Concurrency, Adaptive, RateLimit, Pipeline
// must be set where they were, Pipeline the same value), Name, the
// limiters' names, algorithms and rate-limit store, RetryAfter,
// RateLimitHeaders, TimeoutFrom, ClientIP and AnswerPanics. Functions
// (Priority, Flow, FlowWeight, Classify, Cost, Key, Render, LimiterStats,
// Listener) stay those given to New: each must be set in opts where it
// was set and nil where it was nil, and the new value is not used
// (Reconfigure cannot tell two closures apart). Build a new middleware
// for such a change.
//
// Safe for concurrent use with requests and with other calls of
// Reconfigure, which apply one at a time. Stats counts the calls
// (Stats.Reconfigured, Stats.ReconfigureRefused) and shows the
// configuration in force (Stats.Config); each call is reported to
// Options.Listener as event.Reconfigured (reason "ok" or "failed";
// extensions/otel counts it in resilience.reloads).
//
// To change one part, start from Options, which returns the options in
// force:
//
//	o := m.Options()
//	o.Shadow.Concurrency = 50
//	err := m.Reconfigure(o)
func (m *Middleware) Reconfigure(opts Options) error {
	m.reconf.mu.Lock()
	defer m.reconf.mu.Unlock()
	if err := m.checkReconfigure(&opts); err != nil {
		m.reconf.refused.Add(1)
		m.emitReconfigured(event.ReasonReconfigureFailed, err)
		return err
	}
	// Every check passed: each apply below cannot fail (a limiter's checks
	// depend only on what it was built with, and calls are serialised).
	if opts.Timeout != m.tconf.Load().d {
		m.tconf.Store(newTimeoutConf(m, opts.Timeout))
	}
	m.shadow.set(opts.Shadow)
	switch {
	case m.limiter != nil:
		c := *opts.Concurrency
		m.queueLimit.Store(int64(c.QueueLimit))
		m.limiter.Reconfigure(c) //nolint:errcheck // checked
	case m.adaptive != nil:
		a := *opts.Adaptive
		m.queueLimit.Store(int64(a.QueueLimit))
		m.adaptive.Reconfigure(a) //nolint:errcheck // checked
	}
	if m.rate != nil {
		m.rate.Reconfigure(*opts.RateLimit) //nolint:errcheck // checked
		m.policyValue.Store(&[]string{policyField(m.rate.Policy())})
	}
	m.keepFuncs(&opts)
	m.reconf.live.Store(&opts)
	m.reconf.applied.Add(1)
	m.emitReconfigured(event.ReasonReconfigureOK, nil)
	return nil
}

// emitReconfigured reports a call of Reconfigure to Options.Listener
// (event.Reconfigured), with the strategy name "Reconfigure".
func (m *Middleware) emitReconfigured(reason string, err error) {
	if m.opts.Listener == nil {
		return
	}
	name := m.opts.Name
	if name == "" {
		name = "inbound"
	}
	tel := resilience.NewTelemetry(name, "Reconfigure", m.opts.Listener)
	tel.Emit(context.Background(), event.Event{Name: event.Reconfigured, Reason: reason, Err: err})
}

// keepFuncs puts New's functions (the ones in use) into opts, copying
// each stage's options rather than writing through the caller's pointers.
func (m *Middleware) keepFuncs(opts *Options) {
	was := &m.opts
	opts.Render, opts.LimiterStats, opts.Listener = was.Render, was.LimiterStats, was.Listener
	copyStages(opts)
	if c, w := opts.Concurrency, was.Concurrency; c != nil {
		c.Priority, c.Flow, c.FlowWeight, c.Cost = w.Priority, w.Flow, w.FlowWeight, w.Cost
	}
	if a, w := opts.Adaptive, was.Adaptive; a != nil {
		a.Priority, a.Flow, a.FlowWeight, a.Classify, a.Algorithm = w.Priority, w.Flow, w.FlowWeight, w.Classify, w.Algorithm
	}
	if r, w := opts.RateLimit, was.RateLimit; r != nil {
		r.Key, r.Store, r.Cost = w.Key, w.Store, w.Cost
	}
}

// copyStages points o's stage options at copies of their own, so that
// what o's holder writes is not what another holder reads.
func copyStages(o *Options) {
	if c := o.Concurrency; c != nil {
		cc := *c
		o.Concurrency = &cc
	}
	if a := o.Adaptive; a != nil {
		aa := *a
		o.Adaptive = &aa
	}
	if r := o.RateLimit; r != nil {
		rr := *r
		o.RateLimit = &rr
	}
}

// checkReconfigure validates opts as New does (normalising it, as New
// does) and refuses what cannot change live.
func (m *Middleware) checkReconfigure(opts *Options) error {
	if err := opts.validate(); err != nil {
		return err
	}
	was := &m.opts
	switch {
	case opts.Name != was.Name:
		return notLive("Options.Name", "labels the middleware's telemetry: was %q at New, got %q", was.Name, opts.Name)
	case (opts.Timeout > 0) != m.hasTimeout:
		if m.hasTimeout {
			return notLive("Options.Timeout", "its value can change live, but not to 0 (no timeout)")
		}
		return notLive("Options.Timeout", "was 0 (no timeout) at New; it cannot be turned on live")
	case (opts.Concurrency != nil) != (was.Concurrency != nil):
		return stageNotLive("Options.Concurrency", was.Concurrency != nil)
	case (opts.Adaptive != nil) != (was.Adaptive != nil):
		return stageNotLive("Options.Adaptive", was.Adaptive != nil)
	case (opts.RateLimit != nil) != (was.RateLimit != nil):
		return stageNotLive("Options.RateLimit", was.RateLimit != nil)
	case opts.Pipeline != was.Pipeline:
		return notLive("Options.Pipeline", "must be the pipeline given to New")
	case opts.RetryAfter != was.RetryAfter:
		return notLive("Options.RetryAfter", "was %v at New, got %v", was.RetryAfter, opts.RetryAfter)
	case opts.RateLimitHeaders != was.RateLimitHeaders:
		return notLive("Options.RateLimitHeaders", "was %q at New, got %q", was.RateLimitHeaders, opts.RateLimitHeaders)
	case opts.TimeoutFrom != was.TimeoutFrom:
		return notLive("Options.TimeoutFrom", "was %q at New, got %q", was.TimeoutFrom, opts.TimeoutFrom)
	case opts.AnswerPanics != was.AnswerPanics:
		return notLive("Options.AnswerPanics", "was %v at New, got %v", was.AnswerPanics, opts.AnswerPanics)
	case opts.ClientIP.IPv6Prefix != was.ClientIP.IPv6Prefix || !slices.Equal(opts.ClientIP.TrustedProxies, was.ClientIP.TrustedProxies):
		return notLive("Options.ClientIP", "says how every key is read")
	}
	for _, f := range []struct {
		field   string
		was, is bool
	}{
		{"Options.Render", was.Render != nil, opts.Render != nil},
		{"Options.LimiterStats", was.LimiterStats != nil, opts.LimiterStats != nil},
		{"Options.Listener", was.Listener != nil, opts.Listener != nil},
	} {
		if f.was != f.is {
			return notLive(f.field, "a function (or listener) given to New stays; it can be neither added nor removed")
		}
	}
	switch {
	case m.limiter != nil:
		if err := m.limiter.CheckReconfigure(*opts.Concurrency); err != nil {
			return err
		}
	case m.adaptive != nil:
		if err := m.adaptive.CheckReconfigure(*opts.Adaptive); err != nil {
			return err
		}
	}
	if m.rate != nil {
		if err := m.rate.CheckReconfigure(*opts.RateLimit); err != nil {
			return err
		}
	}
	return nil
}

func notLive(field, format string, args ...any) error {
	ce := configError(field, format, args...).(*resilience.ConfigError)
	return &resilience.NotLiveError{Field: ce.Field, Problem: ce.Problem}
}

func stageNotLive(field string, was bool) error {
	if was {
		return notLive(field, "the stage was built by New; it cannot be removed live")
	}
	return notLive(field, "was nil at New; a stage cannot be added live")
}

// Options returns the options in force: those given to New, or to the
// last Reconfigure that succeeded, as validated; its functions are the
// ones in use, New's, whatever a later Reconfigure was given, and the
// fixed limiter's PermitLimit is the limit in force (as Limiter().SetLimit
// last moved it), so that Reconfigure(m.Options()) changes nothing. The
// stages' options are copies: change them and pass the result to
// Reconfigure.
func (m *Middleware) Options() Options {
	o := m.inForce()
	copyStages(&o)
	if m.limiter != nil {
		o.Concurrency.PermitLimit = m.limiter.Stats().Limit
	}
	return o
}

// inForce is the options in force, sharing the stages' options with the
// middleware (read only).
func (m *Middleware) inForce() Options {
	o := m.opts
	if live := m.reconf.live.Load(); live != nil {
		o = *live
	}
	o.Shadow = Shadow{RateLimit: int(m.shadow.rate.Load()), Concurrency: int(m.shadow.conc.Load()), Timeout: int(m.shadow.timeout.Load())}
	return o
}

// Settings is the configuration in force in plain values, as Stats.Config
// (for a debug endpoint: examples/server's "config" in /debug/limits): what Reconfigure last
// applied, or New. Durations are in milliseconds; the fields of an absent
// stage are zero and, where they would mislead, left out. The values are
// as configured, except the adaptive MinLimit and MaxLimit, which are the
// bounds in force with their defaults applied; an Overflow of "" is the
// queue's default policy. PermitLimit is the configured one:
// Stats.Limit is the limit in force, as the adaptive limiter or
// Limiter().SetLimit moved it. The JSON names are stable.
type Settings struct {
	TimeoutMS      float64 `json:"timeoutMs"`
	PermitLimit    int     `json:"permitLimit,omitempty"`
	Adaptive       bool    `json:"adaptive,omitempty"`
	MinLimit       int     `json:"minLimit,omitempty"`
	MaxLimit       int     `json:"maxLimit,omitempty"`
	QueueLimit     int     `json:"queueLimit"`
	QueueTimeoutMS float64 `json:"queueTimeoutMs"`
	Overflow       string  `json:"overflow,omitempty"`
	CoDel          bool    `json:"codel,omitempty"`
	RateLimit      int     `json:"rateLimit,omitempty"`
	RateWindowMS   float64 `json:"rateWindowMs,omitempty"`
	// The Shadow shares, in percent.
	ShadowRateLimit   int `json:"shadowRateLimit"`
	ShadowConcurrency int `json:"shadowConcurrency"`
	ShadowTimeout     int `json:"shadowTimeout"`
}

// settings is Stats.Config.
func (m *Middleware) settings() Settings {
	o := m.inForce()
	s := Settings{
		TimeoutMS:         ms(o.Timeout),
		ShadowRateLimit:   o.Shadow.RateLimit,
		ShadowConcurrency: o.Shadow.Concurrency,
		ShadowTimeout:     o.Shadow.Timeout,
	}
	switch {
	case o.Concurrency != nil:
		c := o.Concurrency
		s.PermitLimit, s.QueueLimit, s.QueueTimeoutMS = c.PermitLimit, c.QueueLimit, ms(c.QueueTimeout)
		s.Overflow, s.CoDel = string(c.Overflow), c.CoDel != nil
	case o.Adaptive != nil:
		a := o.Adaptive
		s.Adaptive, s.MinLimit, s.MaxLimit = true, a.MinLimit, a.MaxLimit
		if m.adaptive != nil {
			s.MinLimit, s.MaxLimit = m.adaptive.Bounds()
		}
		s.QueueLimit, s.QueueTimeoutMS = a.QueueLimit, ms(a.QueueTimeout)
		s.Overflow, s.CoDel = string(a.Overflow), a.CoDel != nil
	}
	if r := o.RateLimit; r != nil {
		s.RateLimit, s.RateWindowMS = r.PermitLimit, ms(r.Window)
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
