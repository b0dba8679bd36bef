package resilience

import (
	"context"
	"time"
)

// TimeoutOptions configures a timeout strategy. A plain value: NewTimeout
// copies it, so it may be shared and reused; Generator is called
// concurrently and must be safe for that. The zero value is invalid
// (Timeout is required): NewTimeout returns a *ConfigError and builds
// nothing.
type TimeoutOptions struct {
	// Name labels the strategy's events. Default "Timeout".
	Name string
	// Timeout is the time the rest of the pipeline may take. Required (> 0)
	// unless Generator is set.
	Timeout time.Duration
	// Generator, when set, returns the timeout for each execution (for
	// example from a property in ctx). A result <= 0 means no timeout for
	// that execution; a result above 100 years is capped there.
	Generator func(ctx context.Context) time.Duration
}

// TimeoutStrategy cancels the context of the rest of the pipeline when its
// timeout passes. It is cooperative: the callback must watch its context.
// Execute still waits for the callback to return, so nothing it started
// outlives the execution and a concurrency permit outside the timeout stays
// held until the work really stops.
//
// When its own deadline fired, Execute returns a *TimeoutRejectedError,
// which is also context.Cause of the callback's context. When the caller's
// context was cancelled or reached an earlier deadline, the callback's own
// error is returned unchanged: that is the caller's doing, not a timeout of
// this strategy. A callback that returns nil after the deadline still
// succeeds.
//
// Safe for concurrent use; it holds no state between executions. Emits
// EventTimeout. Create it with Timeout or NewTimeout: the zero value runs
// the rest of the pipeline without a timeout and fails Validate.
type TimeoutStrategy struct {
	opts TimeoutOptions
	err  *TimeoutRejectedError // shared cause for the fixed timeout
}

// Timeout returns a timeout strategy with a fixed timeout. An invalid d is
// reported by Builder.Build (or Validate).
func Timeout(d time.Duration) *TimeoutStrategy {
	return newTimeout(TimeoutOptions{Timeout: d})
}

// NewTimeout returns a timeout strategy, or a *ConfigError.
func NewTimeout(opts TimeoutOptions) (*TimeoutStrategy, error) {
	s := newTimeout(opts)
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func newTimeout(opts TimeoutOptions) *TimeoutStrategy {
	if opts.Name == "" {
		opts.Name = "Timeout"
	}
	return &TimeoutStrategy{opts: opts, err: &TimeoutRejectedError{Timeout: opts.Timeout}}
}

// AddTimeout appends a timeout strategy with a fixed timeout.
func (b *Builder[T]) AddTimeout(d time.Duration) *Builder[T] {
	return b.AddStrategy(Timeout(d))
}

// AddTimeoutWithOptions appends a timeout strategy configured by opts.
func (b *Builder[T]) AddTimeoutWithOptions(opts TimeoutOptions) *Builder[T] {
	return b.addBuilt(NewTimeout(opts))
}

// Validate reports invalid options as a *ConfigError.
func (s *TimeoutStrategy) Validate() error {
	if s.opts.Generator != nil {
		return checkNonNegativeDuration("TimeoutOptions.Timeout", s.opts.Timeout)
	}
	return checkPositiveDuration("TimeoutOptions.Timeout", s.opts.Timeout)
}

// StrategyName returns the name used in telemetry.
func (s *TimeoutStrategy) StrategyName() string { return s.opts.Name }

// Execute implements Strategy.
func (s *TimeoutStrategy) Execute(ctx context.Context, tel Telemetry, next Next) error {
	cause := s.err
	d := s.opts.Timeout
	if s.opts.Generator != nil {
		d = s.opts.Generator(ctx)
		if d <= 0 {
			return next(ctx)
		}
		if d > maxDuration {
			d = maxDuration
		}
		if d != s.opts.Timeout {
			cause = &TimeoutRejectedError{Timeout: d}
		}
	}
	if d <= 0 { // invalid options used without Build: no timeout rather than a panic
		return next(ctx)
	}
	tctx, cancel := context.WithTimeoutCause(ctx, d, cause)
	defer cancel()
	err := next(tctx)
	if err != nil && context.Cause(tctx) == error(cause) {
		tel.Emit(ctx, Event{Name: EventTimeout, Duration: d, Err: cause})
		return cause
	}
	return err
}
