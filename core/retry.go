package resilience

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/ylcnfrht/resilience/core/budget"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/property"
)

// BackoffType says how the delay between retries grows. Its values are
// stable strings for configuration files; the empty string means
// BackoffConstant.
type BackoffType string

const (
	// BackoffConstant waits Delay before every retry.
	BackoffConstant BackoffType = "constant"
	// BackoffLinear waits Delay × n before retry n (1, 2, 3, …).
	BackoffLinear BackoffType = "linear"
	// BackoffExponential waits Delay × 2^(n-1) before retry n.
	BackoffExponential BackoffType = "exponential"
)

// ParseBackoffType returns the backoff type named by s, ignoring case,
// surrounding space and '_' for '-'; "" is BackoffConstant. Anything else
// is a *ConfigError that lists the accepted names.
func ParseBackoffType(s string) (BackoffType, error) {
	v, ok := parseEnum(s, BackoffConstant, BackoffConstant, BackoffLinear, BackoffExponential)
	if !ok {
		return "", unknownEnum("RetryOptions.BackoffType", "backoff type", s, BackoffConstant, BackoffLinear, BackoffExponential)
	}
	return v, nil
}

// RetryForever as RetryOptions.MaxRetryAttempts retries until the outcome
// is no longer handled or the context is done. Give the context a
// deadline.
const RetryForever = -1

// RetryArgs describes a failed attempt to OnRetry and DelayGenerator.
type RetryArgs[T any] struct {
	// Outcome is what the attempt returned.
	Outcome Outcome[T]
	// Attempt numbers the attempt that failed: 0 is the first call, so
	// the retry about to happen is retry Attempt+1.
	Attempt int
	// Delay is, for DelayGenerator, the delay the backoff computed; for
	// OnRetry, the delay that will be waited.
	Delay time.Duration
	// Duration is how long the attempt took (0 when neither OnRetry,
	// DelayGenerator nor a listener is set, as it is not measured then).
	Duration time.Duration
}

// RetryOptions configures a Retry. Every field is optional, but the zero
// value retries nothing: set MaxRetryAttempts, and Delay for a pause
// between attempts. Its functions are called concurrently and must be safe
// for that.
type RetryOptions[T any] struct {
	// Name labels the strategy's events. Default "Retry".
	Name string
	// MaxRetryAttempts is the number of retries after the first call; 0
	// means none. RetryForever retries until the context is done.
	MaxRetryAttempts int
	// Delay is the base delay between attempts; 0 retries at once.
	Delay time.Duration
	// BackoffType shapes the delays from Delay; "" means BackoffConstant.
	BackoffType BackoffType
	// UseJitter randomises the delays so that clients that failed together
	// do not retry together: ±25 % for constant and linear backoff, and
	// decorrelated jitter (delays that still grow exponentially but are
	// spread smoothly) for exponential backoff.
	UseJitter bool
	// MaxDelay caps every delay, generated ones included. 0 means no cap.
	MaxDelay time.Duration
	// DelayGenerator, when set, is asked for each delay first. Returning
	// ok=false uses the backoff's delay (in a.Delay); returning ok=true
	// uses d (a negative d counts as 0). retryafter.Delay is one that
	// honours a server's Retry-After carried by the error.
	DelayGenerator func(ctx context.Context, a RetryArgs[T]) (d time.Duration, ok bool)
	// ShouldHandle says whether an outcome is a failure worth retrying. The
	// default handles any error except a context cancellation.
	ShouldHandle func(o Outcome[T]) bool
	// OnRetry, when set, is called before each delay. It is where a value
	// being retried away is released (an HTTP response body closed).
	OnRetry func(ctx context.Context, a RetryArgs[T])
	// Budget, when set, caps retries across executions: each execution
	// records its first attempt in it, and a retry it denies ends the
	// execution with the last outcome (event.RetryBudgetExceeded). Share
	// one budget between the strategies that call the same dependency.
	Budget *budget.Budget
}

// Retry calls the rest of the pipeline again while its outcome is
// handled, up to MaxRetryAttempts times, waiting a backoff delay between
// attempts. A done context ends the retries: a delay is abandoned the
// moment the context is done (the zero T and the context's error are
// returned), and a delay that would outlast the context's deadline is not
// started (the last outcome is returned at once). After the last attempt
// the last outcome is returned as is. A context marked by
// property.WithSingleAttempt gets no retries.
//
// Safe for concurrent use; it keeps no state between executions but its
// Budget's. Emits event.ExecutionAttempt for every attempt, event.Retry
// before each delay and event.RetryBudgetExceeded for a retry its Budget
// denied. Create it with NewRetry or Builder.AddRetry.
type Retry[T any] struct {
	opts        RetryOptions[T] // as given, for validate
	name        string
	max         int
	delay       time.Duration
	maxDelay    time.Duration
	backoff     BackoffType
	jitter      bool
	handle      func(Outcome[T]) bool
	gen         func(context.Context, RetryArgs[T]) (time.Duration, bool)
	onRetry     func(context.Context, RetryArgs[T])
	budget      *budget.Budget
	random      func() float64 // rand.Float64; replaced in tests
	alwaysTimed bool
}

// NewRetry returns a retry strategy, or a *ConfigError naming the first
// invalid option.
func NewRetry[T any](opts RetryOptions[T]) (*Retry[T], error) {
	s := newRetry(opts)
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// newRetry applies the defaults without validating; Build validates.
func newRetry[T any](opts RetryOptions[T]) *Retry[T] {
	s := &Retry[T]{
		opts:     opts,
		name:     opts.Name,
		max:      opts.MaxRetryAttempts,
		delay:    max(opts.Delay, 0),
		maxDelay: opts.MaxDelay,
		backoff:  opts.BackoffType,
		jitter:   opts.UseJitter,
		handle:   opts.ShouldHandle,
		gen:      opts.DelayGenerator,
		onRetry:  opts.OnRetry,
		budget:   opts.Budget,
		random:   rand.Float64,
	}
	if s.name == "" {
		s.name = "Retry"
	}
	if s.max < RetryForever { // invalid, used without Build: no retries
		s.max = 0
	}
	if b, err := ParseBackoffType(string(s.backoff)); err == nil {
		s.backoff = b
	}
	if s.handle == nil {
		s.handle = handlesFailure[T]
	}
	s.alwaysTimed = s.gen != nil || s.onRetry != nil
	return s
}

// AddRetry appends a Retry configured by opts; Build reports invalid
// options.
func (b *Builder[T]) AddRetry(opts RetryOptions[T]) *Builder[T] {
	return b.AddResultStrategy(newRetry(opts))
}

// validate reports invalid options as a *ConfigError.
func (s *Retry[T]) validate() error {
	o := s.opts
	if o.MaxRetryAttempts < RetryForever {
		return configErrorf("RetryOptions.MaxRetryAttempts",
			"must be 0 (no retry), positive or RetryForever, got %d", o.MaxRetryAttempts)
	}
	if err := checkNonNegativeDuration("RetryOptions.Delay", o.Delay); err != nil {
		return err
	}
	if err := checkNonNegativeDuration("RetryOptions.MaxDelay", o.MaxDelay); err != nil {
		return err
	}
	if o.BackoffType != "" {
		if _, err := ParseBackoffType(string(o.BackoffType)); err != nil {
			return err
		}
	}
	return nil
}

// strategyName is the name used in telemetry (see StrategyName).
func (s *Retry[T]) strategyName() string { return s.name }

// ExecuteResult implements ResultStrategy.
func (s *Retry[T]) ExecuteResult(ctx context.Context, tel Telemetry, next ResultNext[T]) (T, error) {
	timed := s.alwaysTimed || tel.Enabled()
	var jitterState float64 // decorrelated jitter's running value, per execution
	if s.budget != nil {
		s.budget.FirstAttempt()
	}
	for attempt := 0; ; attempt++ {
		var start time.Time
		if timed {
			start = time.Now()
		}
		v, err := next(ctx)
		o := Outcome[T]{Value: v, Err: err}
		handled := s.handle(o)
		var took time.Duration
		if timed {
			took = time.Since(start)
			emitAttempt(ctx, tel, attempt, took, handled, err)
		}
		if !handled || (s.max != RetryForever && attempt >= s.max) || ctx.Err() != nil {
			return v, err
		}
		// Looked up only once a retry is due, so the success path never
		// walks the context chain.
		if attempt == 0 && property.SingleAttempt(ctx) {
			return v, err
		}
		delay := s.backoffDelay(attempt, &jitterState)
		if s.gen != nil {
			if d, ok := s.gen(ctx, RetryArgs[T]{Outcome: o, Attempt: attempt, Delay: delay, Duration: took}); ok {
				delay = min(max(d, 0), maxDuration)
			}
		}
		if s.maxDelay > 0 && delay > s.maxDelay {
			delay = s.maxDelay
		}
		// A wait that cannot end before the caller's deadline would only
		// turn this failure into a later deadline error.
		if dl, ok := ctx.Deadline(); ok && delay > 0 && time.Until(dl) <= delay {
			return v, err
		}
		if s.budget != nil && !s.budget.AllowRetry() {
			tel.Emit(ctx, event.Event{Name: event.RetryBudgetExceeded, Attempt: attempt + 1, Err: err})
			return v, err
		}
		if s.onRetry != nil {
			s.onRetry(ctx, RetryArgs[T]{Outcome: o, Attempt: attempt, Delay: delay, Duration: took})
		}
		tel.Emit(ctx, event.Event{Name: event.Retry, Attempt: attempt, Duration: delay, Err: err})
		if err := sleepCtx(ctx, delay); err != nil {
			var zero T
			return zero, err
		}
	}
}

// emitAttempt reports one attempt of a retry or hedging strategy.
func emitAttempt(ctx context.Context, tel Telemetry, attempt int, took time.Duration, handled bool, err error) {
	if !tel.Enabled() {
		return
	}
	reason := event.ReasonUnhandled
	if handled {
		reason = event.ReasonHandled
	}
	tel.Emit(ctx, event.Event{Name: event.ExecutionAttempt, Attempt: attempt, Duration: took, Reason: reason, Err: err})
}

// sleepCtx waits d or until ctx is done, whichever is first, and returns
// ctx.Err() in the second case. The timer is stopped either way, so nothing
// outlives the wait.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoffDelay is the delay before retry attempt+1, before MaxDelay and any
// generator. state carries decorrelated jitter from one retry to the next.
func (s *Retry[T]) backoffDelay(attempt int, state *float64) time.Duration {
	base := float64(s.delay)
	if base == 0 {
		return 0
	}
	var d float64
	switch s.backoff {
	case BackoffLinear:
		d = base * float64(attempt+1)
	case BackoffExponential:
		if s.jitter {
			return clampDelay(decorrelatedJitter(attempt, base, state, s.random()))
		}
		d = base * math.Pow(2, float64(attempt))
	default:
		d = base
	}
	if s.jitter {
		// Uniform in [0.75 d, 1.25 d).
		d += d * (s.random()*0.5 - 0.25)
	}
	return clampDelay(d)
}

// decorrelatedJitter returns the delay before retry attempt+1 under
// exponential backoff with jitter. The curve f(t) = 2^t · tanh(√(4t)) grows
// like 2^t but is smooth near 0; sampling it at attempt plus a uniform
// random offset and paying out the difference from the previous sample
// gives delays whose mean grows exponentially while neighbouring clients
// spread evenly instead of clumping. The 1/1.4 factor makes the median
// first delay about base.
func decorrelatedJitter(attempt int, base float64, prev *float64, r float64) float64 {
	t := float64(attempt) + r
	next := math.Pow(2, t) * math.Tanh(math.Sqrt(4*t))
	d := (next - *prev) / 1.4 * base
	*prev = next
	return d
}

// clampDelay converts a float delay to a Duration in [0, maxDuration]; NaN
// and infinities (far-off attempts of RetryForever) become the maximum.
func clampDelay(d float64) time.Duration {
	switch {
	case math.IsNaN(d) || d >= float64(maxDuration):
		return maxDuration
	case d <= 0:
		return 0
	}
	return time.Duration(d)
}
