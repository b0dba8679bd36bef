// Package throttle rejects calls locally while their dependency refuses
// most of what it is sent (client-side throttling), so that the refusals
// cost no round trip and no load on it. Most callers want New: its
// *Throttle is a resilience.ResultStrategy, added to a pipeline after the
// Retry or Hedging with Builder.AddResultStrategy.
package throttle

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/internal/config"
	"github.com/ylcnfrht/resilience/core/internal/window"
)

// Options configures a Throttle. The zero value is the defaults: K 2 over
// a 10 s window, at least one request a second let through, and every
// error but a cancellation counted as the dependency refusing. Its
// function is called concurrently and must be safe for that.
type Options[T any] struct {
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
	IsRejected func(o resilience.Outcome[T]) bool
}

// Defaults of Options.
const (
	DefaultK            = 2.0
	DefaultWindow       = 10 * time.Second
	DefaultMinPerSecond = 1.0
)

// ErrThrottled matches *ThrottledError.
var ErrThrottled = errors.New("resilience: throttled")

// ThrottledError is returned by a Throttle that rejected an execution
// locally: the rest of the pipeline did not run and nothing was sent.
// Match with errors.As, or errors.Is against ErrThrottled or
// resilience.ErrRejected. The throttle returns one shared value: do not
// modify it.
type ThrottledError struct{}

func (e *ThrottledError) Error() string {
	return "resilience: throttled locally, the dependency is refusing requests"
}

// Is reports whether target is ErrThrottled or resilience.ErrRejected.
func (e *ThrottledError) Is(target error) bool {
	return target == ErrThrottled || target == resilience.ErrRejected
}

var throttledErr = &ThrottledError{}

// Throttle is client-side throttling as the Google SRE book describes it:
// it counts the requests made through it and those the dependency
// accepted over a sliding window, and rejects a new request locally with
// probability
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
// The zero value is not usable: create it with New.
type Throttle[T any] struct {
	name     string
	k        float64
	floor    float64 // sends per window always let through
	rejected func(resilience.Outcome[T]) bool
	w        window.Window // A: requests, B: accepts, C: sent
	random   func() float64
	// throttled counts local rejections since creation.
	throttled atomic.Uint64
}

// New returns a throttle, or a *resilience.ConfigError naming the first
// invalid option.
func New[T any](opts Options[T]) (*Throttle[T], error) {
	if opts.K != 0 && !(opts.K >= 1) {
		return nil, config.Errorf("throttle.Options.K", "must be 0 (default 2) or at least 1, got %v", opts.K)
	}
	if err := config.NonNegativeDuration("throttle.Options.Window", opts.Window); err != nil {
		return nil, err
	}
	if opts.Window != 0 && opts.Window < window.MinWindow {
		return nil, config.Errorf("throttle.Options.Window", "must be 0 (default 10s) or at least %v, got %v", window.MinWindow, opts.Window)
	}
	s := &Throttle[T]{name: opts.Name, k: opts.K, rejected: opts.IsRejected, random: rand.Float64}
	if s.name == "" {
		s.name = "AdaptiveThrottle"
	}
	if s.k == 0 {
		s.k = DefaultK
	}
	perSec := opts.MinPerSecond
	switch {
	case perSec == 0:
		perSec = DefaultMinPerSecond
	case perSec < 0:
		perSec = 0
	}
	win := opts.Window
	if win == 0 {
		win = DefaultWindow
	}
	s.floor = perSec * win.Seconds()
	if s.rejected == nil {
		s.rejected = refusedByDefault[T]
	}
	s.w.Init(win)
	return s, nil
}

// refusedByDefault is the default IsRejected.
func refusedByDefault[T any](o resilience.Outcome[T]) bool {
	return o.Err != nil && !errors.Is(o.Err, context.Canceled) && !errors.Is(o.Err, ErrThrottled)
}

// StrategyName returns the Name of its options, or "AdaptiveThrottle": the
// name a pipeline labels its events with (resilience.Named).
func (s *Throttle[T]) StrategyName() string { return s.name }

// Allow decides one request: true lets it through (report its outcome
// with Record), false rejects it locally. ExecuteResult calls both; call
// them yourself only to throttle work that does not run through a
// pipeline.
func (s *Throttle[T]) Allow() bool {
	r := s.random() // outside the lock: the draw is independent of the counts
	s.w.Mu.Lock()
	cur := s.w.Advance()
	requests, accepts, sent := s.w.Sums3()
	p := (float64(requests) - s.k*float64(accepts)) / float64(requests+1)
	ok := p <= 0 || r >= p || float64(sent) < s.floor
	if ok {
		cur.C++
	} else {
		cur.A++
	}
	s.w.Mu.Unlock()
	if !ok {
		s.throttled.Add(1)
	}
	return ok
}

// Record reports the outcome of a request Allow let through: accepted is
// false when the dependency refused it. Every request Allow let through
// must be recorded once.
func (s *Throttle[T]) Record(accepted bool) {
	s.w.Mu.Lock()
	cur := s.w.Advance()
	cur.A++
	if accepted {
		cur.B++
	}
	s.w.Mu.Unlock()
}

// ExecuteResult implements resilience.ResultStrategy.
func (s *Throttle[T]) ExecuteResult(ctx context.Context, tel resilience.Telemetry, next resilience.ResultNext[T]) (T, error) {
	if !s.Allow() {
		tel.Emit(ctx, event.Event{Name: event.Throttled, Err: throttledErr})
		var zero T
		return zero, throttledErr
	}
	v, err := next(ctx)
	s.Record(!s.rejected(resilience.Outcome[T]{Value: v, Err: err}))
	return v, err
}

// Stats is a snapshot of a Throttle.
type Stats struct {
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
func (s *Throttle[T]) Stats() Stats {
	s.w.Mu.Lock()
	s.w.Advance()
	requests, accepts, sent := s.w.Sums3()
	s.w.Mu.Unlock()
	p := max(0, (float64(requests)-s.k*float64(accepts))/float64(requests+1))
	return Stats{Requests: requests, Accepts: accepts, Sent: sent, Probability: p, Throttled: s.throttled.Load()}
}
