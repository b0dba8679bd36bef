package resilience

import (
	"context"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/internal/deadline"
)

// TimeoutOptions configures a Timeout. Timeout is required unless
// Generator is set. Generator and OnTimeout are called concurrently and
// must be safe for that.
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
	// OnTimeout, when set, is called when the strategy's own deadline ended
	// an execution, with the caller's context and the timeout that fired,
	// after the callback returned and before Execute returns the
	// *TimeoutRejectedError.
	OnTimeout func(ctx context.Context, timeout time.Duration)
}

// Timeout cancels the context of the rest of the pipeline when its timeout
// passes. It is cooperative: the callback must watch its context. Execute
// still waits for the callback to return, so nothing it started outlives
// the execution and a concurrency permit outside the timeout stays held
// until the work really stops.
//
// When its own deadline fired, Execute returns a *TimeoutRejectedError,
// which is also context.Cause of the callback's context. When the caller's
// context was cancelled or reached an earlier deadline, the callback's own
// error is returned unchanged: that is the caller's doing, not a timeout of
// this strategy. A callback that returns nil after the deadline still
// succeeds. The callback's context behaves like one from
// context.WithDeadlineCause.
//
// Safe for concurrent use. Emits event.Timeout. Create it with NewTimeout or
// Builder.AddTimeout; it must not be copied after first use.
type Timeout struct {
	// The callback's context is not a context.WithDeadlineCause: the
	// executions of a strategy share one timer, kept on a list in deadline
	// order, instead of a runtime timer each, and the context's done
	// channel and its watch on the caller's context are set up only if the
	// callback asks for them. That timer may stay armed after the last
	// execution, until the deadline it was set for; it then fires once and
	// idles. Inside a testing/synctest bubble each execution uses a timer
	// of its own, so a strategy shared by tests in and out of bubbles keeps
	// its timing.
	opts      TimeoutOptions
	err       *TimeoutRejectedError // shared cause for the fixed timeout
	deadlines deadline.List         // one timer for every execution's deadline
}

// NewTimeout returns a timeout strategy, or a *ConfigError.
func NewTimeout(opts TimeoutOptions) (*Timeout, error) {
	s := newTimeout(opts)
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func newTimeout(opts TimeoutOptions) *Timeout {
	if opts.Name == "" {
		opts.Name = "Timeout"
	}
	return &Timeout{opts: opts, err: &TimeoutRejectedError{Timeout: opts.Timeout}}
}

// AddTimeout appends a Timeout configured by opts; Build reports invalid
// options.
func (b *Builder[T]) AddTimeout(opts TimeoutOptions) *Builder[T] {
	return b.AddStrategy(newTimeout(opts))
}

// validate reports invalid options as a *ConfigError.
func (s *Timeout) validate() error {
	if s.opts.Generator != nil {
		return checkNonNegativeDuration("TimeoutOptions.Timeout", s.opts.Timeout)
	}
	return checkPositiveDuration("TimeoutOptions.Timeout", s.opts.Timeout)
}

// strategyName is the name used in telemetry (see StrategyName).
func (s *Timeout) strategyName() string { return s.opts.Name }

// Execute implements Strategy.
func (s *Timeout) Execute(ctx context.Context, tel Telemetry, next Next) error {
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
	now := deadline.Now()
	dl := now.Add(d)
	if pd, ok := ctx.Deadline(); ok && !pd.After(dl) {
		// The caller's deadline comes first: ours can never fire, and the
		// callback's context is the caller's own.
		return next(ctx)
	}
	r := &timeoutRun{cause: cause}
	r.ctx.Init(ctx, dl)
	r.node.Owner = r
	if !s.deadlines.Add(&r.node, now, d) {
		r.timer = time.AfterFunc(d, r.Fire)
	}
	defer r.finish(&s.deadlines)
	err := next(&r.ctx)
	if err != nil && r.ctx.EndedWith(cause) {
		tel.Emit(ctx, event.Event{Name: event.Timeout, Duration: d, Err: cause})
		if s.opts.OnTimeout != nil {
			s.opts.OnTimeout(ctx, d)
		}
		return cause
	}
	return err
}

// timeoutRun is one execution under a Timeout: the callback's
// context and its place on the strategy's deadline list, in one
// allocation.
type timeoutRun struct {
	ctx   deadline.Context
	node  deadline.Node
	cause *TimeoutRejectedError
	timer *time.Timer // its own, when the list could not take it
}

// Fire is the deadline: the callback's context ends with DeadlineExceeded
// and the strategy's cause.
func (r *timeoutRun) Fire() { r.ctx.End(context.DeadlineExceeded, r.cause) }

// finish takes the run off the list (or stops its timer) and ends its
// context, releasing what was derived from it.
func (r *timeoutRun) finish(l *deadline.List) {
	if r.timer != nil {
		r.timer.Stop()
	} else {
		l.Remove(&r.node)
	}
	r.ctx.End(context.Canceled, nil)
}
