package resilience

import (
	"errors"
	"fmt"

	"github.com/ylcnfrht/resilience/core/internal/queue"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// NotLiveError reports an option that Reconfigure cannot change while a
// limiter or middleware is in use: a function (Priority, Flow, Key,
// Classify, ...) appearing or going away, a limiter's name, algorithm or
// store, a stage added or removed. Field names the option as a
// *ConfigError does. Nothing changed when it is returned. It matches
// ErrNotLive with errors.Is and unwraps to a *ConfigError with the same
// Field, so code that reports invalid options by field reports it too.
// To make such a change, build a new limiter (or middleware) and swap it
// in.
type NotLiveError struct {
	Field   string
	Problem string
}

// ErrNotLive matches *NotLiveError.
var ErrNotLive = errors.New("resilience: option cannot change while in use")

func (e *NotLiveError) Error() string {
	return "resilience: " + e.Field + " cannot change while in use: " + e.Problem
}

// Is reports whether target is ErrNotLive.
func (e *NotLiveError) Is(target error) bool { return target == ErrNotLive }

// Unwrap returns the same refusal as a *ConfigError.
func (e *NotLiveError) Unwrap() error {
	return &ConfigError{Field: e.Field, Problem: "cannot change while in use: " + e.Problem}
}

func notLive(field, format string, args ...any) error {
	return &NotLiveError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// sameSet checks that a function option is set in both or in neither:
// Reconfigure keeps the functions a limiter was built with, since it
// cannot tell two closures apart, but a function that appears or goes
// away changes how executions are ranked or keyed.
func sameSet(field string, was, is bool) error {
	if was != is {
		if was {
			return notLive(field, "was set when the limiter was built; it cannot be removed")
		}
		return notLive(field, "was not set when the limiter was built; it cannot be added")
	}
	return nil
}

// CheckReconfigure reports the error Reconfigure would return for opts
// (a *ConfigError naming the invalid field, or a *NotLiveError), without
// changing anything: for validating a configuration before applying it,
// together with other parts that must change with it.
func (l *ConcurrencyLimiter) CheckReconfigure(opts ConcurrencyLimiterOptions) error {
	if err := validateConcurrencyOptions(opts); err != nil {
		return err
	}
	const t = "ConcurrencyLimiterOptions."
	if opts.Name != l.opts.Name {
		return notLive(t+"Name", "the limiter was built named %q, got %q", l.opts.Name, opts.Name)
	}
	if err := sameSet(t+"Cost", l.opts.Cost != nil, opts.Cost != nil); err != nil {
		return err
	}
	return checkSameFuncs(t, l.fair, funcsSet{
		l.opts.Priority != nil, l.opts.Flow != nil, l.opts.FlowWeight != nil,
	}, funcsSet{opts.Priority != nil, opts.Flow != nil, opts.FlowWeight != nil}, opts.QueueLimit)
}

// funcsSet says which of a limiter's queue functions are set.
type funcsSet struct{ priority, flow, weight bool }

func checkSameFuncs(t string, fair *ranker, was, is funcsSet, queueLimit int) error {
	if err := sameSet(t+"Priority", was.priority, is.priority); err != nil {
		return err
	}
	if err := sameSet(t+"Flow", was.flow, is.flow); err != nil {
		return err
	}
	if err := sameSet(t+"FlowWeight", was.weight, is.weight); err != nil {
		return err
	}
	if is.flow && fair == nil && queueLimit > 0 {
		// Built without a queue, the limiter has no fair queue to order
		// the flows in.
		return notLive(t+"QueueLimit", "a limiter with a Flow function built without a queue cannot gain one")
	}
	return nil
}

// Reconfigure changes the limiter's options while it is in use, all at
// once under its lock: PermitLimit, QueueLimit, QueueTimeout, Overflow
// and CoDel. An invalid field is a *ConfigError and a part that cannot
// change live a *NotLiveError (see CheckReconfigure); either way nothing
// changes. The functions the limiter was built with stay in use: Priority,
// Flow and FlowWeight must each be set in opts if and only if they were
// set at construction, and Name must be the same.
//
// Running executions keep their permits: a lower PermitLimit admits again
// once fewer are in flight, a higher one grants queued waiters at once.
// A QueueLimit below the queue's length evicts the excess, the newest of
// the lowest priority first (in a fair queue, of the flow using the most),
// each rejected with ReasonDropped exactly as the overflow policy evicts
// (its own Execute emits the event). A new QueueTimeout applies to the
// executions that queue from now on.
func (l *ConcurrencyLimiter) Reconfigure(opts ConcurrencyLimiterOptions) error {
	if err := l.CheckReconfigure(opts); err != nil {
		return err
	}
	eo := engineOptions(opts.PermitLimit, opts.QueueLimit, opts.QueueTimeout, l.opts.Priority, opts.Overflow, opts.CoDel)
	l.engine.Reconfigure(settings(eo))
	return nil
}

func settings(o queue.Options) queue.Settings {
	return queue.Settings{Limit: o.Limit, QueueLimit: o.QueueLimit, QueueTimeout: o.QueueTimeout, Overflow: o.Overflow, CoDel: o.CoDel}
}

// CheckReconfigure is ConcurrencyLimiter.CheckReconfigure for an adaptive
// limiter.
func (a *AdaptiveLimiter) CheckReconfigure(opts AdaptiveLimiterOptions) error {
	if err := validateAdaptiveOptions(opts); err != nil {
		return err
	}
	const t = "AdaptiveLimiterOptions."
	if opts.Name != a.opts.Name {
		return notLive(t+"Name", "the limiter was built named %q, got %q", a.opts.Name, opts.Name)
	}
	if opts.Algorithm != nil && opts.Algorithm != a.opts.Algorithm {
		return notLive(t+"Algorithm", "an algorithm holds the limiter's state; leave it nil (or the same value) to keep it")
	}
	if opts.IgnoreCPUWait != a.opts.IgnoreCPUWait {
		return notLive(t+"IgnoreCPUWait", "was %v when the limiter was built, got %v", a.opts.IgnoreCPUWait, opts.IgnoreCPUWait)
	}
	if err := sameSet(t+"Classify", a.opts.Classify != nil, opts.Classify != nil); err != nil {
		return err
	}
	return checkSameFuncs(t, a.fair, funcsSet{
		a.opts.Priority != nil, a.opts.Flow != nil, a.opts.FlowWeight != nil,
	}, funcsSet{opts.Priority != nil, opts.Flow != nil, opts.FlowWeight != nil}, opts.QueueLimit)
}

// Reconfigure changes the adaptive limiter's options while it is in use,
// as ConcurrencyLimiter.Reconfigure does, with the same contract: MinLimit
// and MaxLimit (the limit moves into the new bounds at once, and the
// algorithm's next limits are held to them), QueueLimit, QueueTimeout,
// Overflow and CoDel. InitialLimit is checked against the bounds but no
// longer applies: the limit in force is the one learnt. The algorithm
// and its state stay (Algorithm nil or the same value), and so do the
// functions and IgnoreCPUWait.
func (a *AdaptiveLimiter) Reconfigure(opts AdaptiveLimiterOptions) error {
	if err := a.CheckReconfigure(opts); err != nil {
		return err
	}
	minL := defaultInt(opts.MinLimit, defaultAdaptiveMinLimit)
	maxL := defaultInt(opts.MaxLimit, defaultAdaptiveMaxLimit)
	a.engine.Lock()
	a.minLimit, a.maxLimit = minL, maxL
	a.estimate = min(max(a.estimate, float64(minL)), float64(maxL))
	eo := engineOptions(int(a.estimate), opts.QueueLimit, opts.QueueTimeout, a.opts.Priority, opts.Overflow, opts.CoDel)
	a.engine.ReconfigureLocked(settings(eo))
	a.engine.Unlock()
	return nil
}

// CheckReconfigure is ConcurrencyLimiter.CheckReconfigure for a rate
// limiter.
func (l *RateLimiter) CheckReconfigure(opts RateLimiterOptions) error {
	if l.store == nil {
		return l.unusable()
	}
	probe := RateLimiter{opts: opts}
	if err := probe.validate(); err != nil {
		return err
	}
	const t = "RateLimiterOptions."
	alg, _ := ratelimit.ParseAlgorithm(string(opts.Algorithm))
	switch {
	case opts.Name != l.opts.Name:
		return notLive(t+"Name", "names the policy in the store: the limiter was built named %q, got %q", l.opts.Name, opts.Name)
	case alg != l.opts.Algorithm:
		return notLive(t+"Algorithm", "the store keeps %s state per key", l.opts.Algorithm)
	case opts.Store != nil && opts.Store != l.opts.Store:
		return notLive(t+"Store", "the counters live in the store the limiter was built with")
	case opts.MaxKeys != l.opts.MaxKeys:
		return notLive(t+"MaxKeys", "sizes the in-memory store the limiter was built with (%d)", l.opts.MaxKeys)
	case defaultInt(opts.MaxKeyLength, defaultRateLimitMaxKeyLength) != l.maxLen:
		return notLive(t+"MaxKeyLength", "keys are already stored shortened to %d bytes", l.maxLen)
	case opts.FailClosed != l.opts.FailClosed:
		return notLive(t+"FailClosed", "was %v when the limiter was built, got %v", l.opts.FailClosed, opts.FailClosed)
	}
	if err := sameSet(t+"Cost", l.opts.Cost != nil, opts.Cost != nil); err != nil {
		return err
	}
	return sameSet(t+"Key", l.opts.Key != nil, opts.Key != nil)
}

// Reconfigure changes the rate limiter's PermitLimit and Window while it
// is in use (for a token bucket, its size and refill), with the contract
// of ConcurrencyLimiter.Reconfigure: an invalid field is a *ConfigError,
// a part that cannot change live (Name, Algorithm, Store, MaxKeys,
// MaxKeyLength, FailClosed, Key set or not) a *NotLiveError, and then
// nothing changes. The next take of every key counts under the new
// policy, with the key's state as it stands: permits already taken in
// the window count against the new limit. The Key function the limiter
// was built with stays in use.
func (l *RateLimiter) Reconfigure(opts RateLimiterOptions) error {
	if err := l.CheckReconfigure(opts); err != nil {
		return err
	}
	p := l.livePolicy()
	p.Limit, p.Window = opts.PermitLimit, opts.Window
	l.live.Store(&p)
	return nil
}
