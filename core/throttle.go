package resilience

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
)

// AdaptiveThrottleOptions configures an AdaptiveThrottle. The zero value
// is the defaults: K 2 over a 10 s window, at least one request a second
// let through, and every error but a cancellation counted as the
// dependency refusing. Its function is called concurrently and must be
// safe for that.
type AdaptiveThrottleOptions[T any] struct {
	// Name labels the strategy's events. Default "AdaptiveThrottle".
	Name string
	// K is how many requests per accepted one are let through before the
	// throttle starts rejecting locally: 2 (the default) sends up to
	// twice what the dependency accepts, so it wastes at most one request
	// per accepted one and still sees a recovery quickly. Lower is more
	// aggressive; it must be at least 1 (below, it would reject requests
	// that would all be accepted).
	K float64
	// Window is how far back requests and accepts are counted. 0 means
	// 10 s: long enough to smooth a noisy second, short enough that the
	// rejections end within seconds of the dependency's recovery.
	Window time.Duration
	// MinPerSecond is how many requests a second are always let through
	// whatever the rejection probability, so that a recovery is seen even
	// when nearly everything is being rejected locally. 0 means 1; a
	// negative value means none.
	MinPerSecond float64
	// IsRejected says whether an outcome is the dependency refusing the
	// request (overloaded, shedding, timed out) rather than answering it.
	// The default counts any error but a context cancellation (the caller
	// giving up says nothing about the dependency) and the throttle's own
	// rejection. outbound.ThrottleOptions has one for HTTP: 429, 502, 503,
	// 504, timeouts and transport errors refuse; every other status,
	// 4xx included, is an answer.
	IsRejected func(o Outcome[T]) bool
}

// Defaults of AdaptiveThrottleOptions.
const (
	DefaultThrottleK            = 2.0
	DefaultThrottleWindow       = 10 * time.Second
	DefaultThrottleMinPerSecond = 1.0
)

// ErrThrottled matches *ThrottledError.
var ErrThrottled = errors.New("resilience: throttled")

// ThrottledError is returned by an AdaptiveThrottle that rejected an
// execution locally: the rest of the pipeline did not run and nothing was
// sent. Match with errors.As, or errors.Is against ErrThrottled or
// ErrRejected. The throttle returns one shared value: do not modify it.
type ThrottledError struct{}

func (e *ThrottledError) Error() string {
	return "resilience: throttled locally, the dependency is refusing requests"
}

// Is reports whether target is ErrThrottled or ErrRejected.
func (e *ThrottledError) Is(target error) bool {
	return target == ErrThrottled || target == ErrRejected
}

var throttledErr = &ThrottledError{}

// AdaptiveThrottle is client-side throttling as the Google SRE book
// describes it: it counts the requests made through it and those the
// dependency accepted over a sliding window, and rejects a new request
// locally with probability
//
//	max(0, (requests − K × accepts) / (requests + 1))
//
// so that when the dependency refuses most of what it is sent, most of
// the refusals happen here, without a network round trip and without
// load on the dependency. It never rejects while the dependency accepts
// at least 1/K of the requests, and it always lets MinPerSecond requests
// a second through so that a recovery is seen. Locally rejected requests
// count as requests, which keeps the rejection going for as long as the
// dependency refuses what does go through. A request let through counts
// once its outcome is known: requests still in flight are neither
// requests nor accepts yet, so a slow dependency is not mistaken for a
// refusing one while its answers are on their way.
//
// Put it inside a Retry or Hedging (added after them), so that each
// attempt is counted and throttled. Safe for concurrent use; a decision
// does not allocate. Emits event.Throttled for every local rejection.
// The zero value is not usable: create it with NewAdaptiveThrottle or
// Builder.AddAdaptiveThrottle.
type AdaptiveThrottle[T any] struct {
	opts     AdaptiveThrottleOptions[T]
	name     string
	k        float64
	floor    float64 // sends per window always let through
	rejected func(Outcome[T]) bool
	w        slotWindow // a: requests, b: accepts, c: sent
	random   func() float64
	// throttled counts local rejections since creation.
	throttled atomic.Uint64
}

// NewAdaptiveThrottle returns a throttle, or a *ConfigError naming the
// first invalid option.
func NewAdaptiveThrottle[T any](opts AdaptiveThrottleOptions[T]) (*AdaptiveThrottle[T], error) {
	s := newAdaptiveThrottle(opts)
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func newAdaptiveThrottle[T any](opts AdaptiveThrottleOptions[T]) *AdaptiveThrottle[T] {
	s := &AdaptiveThrottle[T]{opts: opts, name: opts.Name, k: opts.K, rejected: opts.IsRejected, random: rand.Float64}
	if s.name == "" {
		s.name = "AdaptiveThrottle"
	}
	if s.k == 0 {
		s.k = DefaultThrottleK
	}
	s.k = max(s.k, 1) // invalid values used without Build stay sane
	perSec := opts.MinPerSecond
	switch {
	case perSec == 0:
		perSec = DefaultThrottleMinPerSecond
	case perSec < 0:
		perSec = 0
	}
	window := opts.Window
	if window < windowSlots*time.Millisecond {
		window = DefaultThrottleWindow
	}
	s.floor = perSec * window.Seconds()
	if s.rejected == nil {
		s.rejected = refusedByDefault[T]
	}
	s.w.init(window)
	return s
}

// refusedByDefault is the default IsRejected.
func refusedByDefault[T any](o Outcome[T]) bool {
	return o.Err != nil && !errors.Is(o.Err, context.Canceled) && !errors.Is(o.Err, ErrThrottled)
}

// AddAdaptiveThrottle appends an AdaptiveThrottle configured by opts;
// Build reports invalid options. Add it after a Retry or Hedging so that
// it sees every attempt.
func (b *Builder[T]) AddAdaptiveThrottle(opts AdaptiveThrottleOptions[T]) *Builder[T] {
	return b.AddResultStrategy(newAdaptiveThrottle(opts))
}

func (s *AdaptiveThrottle[T]) validate() error {
	o := s.opts
	if o.K != 0 && !(o.K >= 1) {
		return configErrorf("AdaptiveThrottleOptions.K", "must be 0 (default 2) or at least 1, got %v", o.K)
	}
	if err := checkNonNegativeDuration("AdaptiveThrottleOptions.Window", o.Window); err != nil {
		return err
	}
	if o.Window != 0 && o.Window < windowSlots*time.Millisecond {
		return configErrorf("AdaptiveThrottleOptions.Window", "must be 0 (default 10s) or at least %v, got %v", windowSlots*time.Millisecond, o.Window)
	}
	return nil
}

// strategyName is the name used in telemetry (see StrategyName).
func (s *AdaptiveThrottle[T]) strategyName() string { return s.name }

// Allow decides one request: true lets it through (report its outcome
// with Record), false rejects it locally. ExecuteResult calls both; call
// them yourself only to throttle work that does not run through a
// pipeline.
func (s *AdaptiveThrottle[T]) Allow() bool {
	r := s.random() // outside the lock: the draw is independent of the counts
	s.w.mu.Lock()
	cur := s.w.advance()
	requests, accepts, sent := s.w.sums3()
	p := (float64(requests) - s.k*float64(accepts)) / float64(requests+1)
	ok := p <= 0 || r >= p || float64(sent) < s.floor
	if ok {
		cur.c++
	} else {
		cur.a++
	}
	s.w.mu.Unlock()
	if !ok {
		s.throttled.Add(1)
	}
	return ok
}

// Record reports the outcome of a request Allow let through: accepted is
// false when the dependency refused it. Every request Allow let through
// must be recorded once.
func (s *AdaptiveThrottle[T]) Record(accepted bool) {
	s.w.mu.Lock()
	cur := s.w.advance()
	cur.a++
	if accepted {
		cur.b++
	}
	s.w.mu.Unlock()
}

// ExecuteResult implements ResultStrategy.
func (s *AdaptiveThrottle[T]) ExecuteResult(ctx context.Context, tel Telemetry, next ResultNext[T]) (T, error) {
	if !s.Allow() {
		tel.Emit(ctx, event.Event{Name: event.Throttled, Err: throttledErr})
		var zero T
		return zero, throttledErr
	}
	v, err := next(ctx)
	s.Record(!s.rejected(Outcome[T]{Value: v, Err: err}))
	return v, err
}

// AdaptiveThrottleStats is a snapshot of an AdaptiveThrottle.
type AdaptiveThrottleStats struct {
	// Requests, Accepts and Sent are what the current window holds:
	// requests decided (rejected locally, or let through and answered),
	// those the dependency accepted, and those let through.
	Requests, Accepts, Sent int64
	// Probability is the rejection probability a request would meet now,
	// before the MinPerSecond floor.
	Probability float64
	// Throttled counts local rejections since the throttle was made.
	Throttled uint64
}

// Stats returns the throttle's current state, for metrics and tests.
func (s *AdaptiveThrottle[T]) Stats() AdaptiveThrottleStats {
	s.w.mu.Lock()
	s.w.advance()
	requests, accepts, sent := s.w.sums3()
	s.w.mu.Unlock()
	p := max(0, (float64(requests)-s.k*float64(accepts))/float64(requests+1))
	return AdaptiveThrottleStats{Requests: requests, Accepts: accepts, Sent: sent, Probability: p, Throttled: s.throttled.Load()}
}
