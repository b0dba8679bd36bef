package resilience

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
)

// CircuitState is the state of a circuit breaker.
type CircuitState int

const (
	// CircuitClosed: executions run; outcomes are sampled.
	CircuitClosed CircuitState = iota
	// CircuitOpen: executions are rejected with *BrokenCircuitError until
	// the break duration has passed.
	CircuitOpen
	// CircuitHalfOpen: the break has passed and one probe execution runs;
	// its outcome closes the circuit or opens it again. Others are
	// rejected meanwhile.
	CircuitHalfOpen
	// CircuitIsolated: opened by hand (Isolate); every execution is
	// rejected with a *BrokenCircuitError whose Isolated is set, until
	// Close.
	CircuitIsolated
)

// String returns "closed", "open", "half-open" or "isolated".
func (s CircuitState) String() string {
	switch s {
	case CircuitClosed:
		return "closed"
	case CircuitOpen:
		return "open"
	case CircuitHalfOpen:
		return "half-open"
	case CircuitIsolated:
		return "isolated"
	}
	return "CircuitState(?)"
}

// BreakDurationArgs is what a BreakDurationGenerator decides from.
type BreakDurationArgs struct {
	// FailureRate is failures/throughput in the sampling window when the
	// circuit opened from closed; 1 when a probe failed.
	FailureRate float64
	// FailureCount is the number of failures in the sampling window (1
	// when a probe failed).
	FailureCount int
	// HalfOpenAttempts counts the consecutive failed probes since the
	// circuit was last closed: 0 when opening from closed, so a generator
	// can lengthen the break each time a probe fails.
	HalfOpenAttempts int
}

// CircuitArgs describes a transition to OnOpened, OnClosed and OnHalfOpened.
// The transition has already happened when a callback gets it, so a
// callback that panics does not undo it.
type CircuitArgs[T any] struct {
	// Outcome is the outcome that caused the transition (zero for a
	// manual one or for half-opening).
	Outcome Outcome[T]
	// BreakDuration is how long the circuit stays open (OnOpened only).
	BreakDuration time.Duration
	// Manual is true for Isolate and Close.
	Manual bool
}

// CircuitBreakerOptions configures a CircuitBreaker; the zero value of
// each field means its default, so the zero value is Polly's default
// breaker: it opens for 5 s when at least 10 % of at least 100 executions
// in the last 30 s failed. Its functions are called concurrently and must
// be safe for that.
type CircuitBreakerOptions[T any] struct {
	// Name labels the strategy's events. Default "CircuitBreaker".
	Name string
	// FailureRatio is the share of handled outcomes in the sampling window
	// at or above which the circuit opens, in (0, 1]; 0 means 0.1.
	FailureRatio float64
	// MinimumThroughput is the number of executions the sampling window
	// must hold before the ratio is trusted, at least 2; 0 means 100.
	MinimumThroughput int
	// SamplingDuration is the window over which outcomes are counted, at
	// least 500 ms; 0 means 30 s.
	SamplingDuration time.Duration
	// BreakDuration is how long the circuit stays open before a probe, at
	// least 500 ms; 0 means 5 s.
	BreakDuration time.Duration
	// BreakDurationGenerator, when set, decides each break duration; a
	// result <= 0 means BreakDuration, and it is capped at 100 years. It
	// is called outside the breaker's lock (it may call State); if the
	// breaker changed state meanwhile, its result is dropped.
	BreakDurationGenerator func(a BreakDurationArgs) time.Duration
	// ShouldHandle says whether an outcome is a failure. The default
	// handles any error except a context cancellation; outcomes it does
	// not handle count as successes. An outcome whose error is a
	// context.Canceled while the execution's own context is done is never
	// asked about: it is the caller giving up, which says nothing about
	// the dependency, so it counts as neither success nor failure (a
	// deviation from Polly v8, which counts it as a success), and a probe
	// ending that way frees the probe slot for the next execution.
	ShouldHandle func(o Outcome[T]) bool
	// OnOpened, OnClosed and OnHalfOpened are called after each
	// transition, outside the breaker's lock, on the goroutine of the
	// execution (or Isolate/Close call) that caused it.
	OnOpened     func(ctx context.Context, a CircuitArgs[T])
	OnClosed     func(ctx context.Context, a CircuitArgs[T])
	OnHalfOpened func(ctx context.Context, a CircuitArgs[T])
}

const (
	defaultFailureRatio      = 0.1
	defaultMinimumThroughput = 100
	defaultSamplingDuration  = 30 * time.Second
	defaultBreakDuration     = 5 * time.Second
	minCircuitDuration       = 500 * time.Millisecond
	healthBuckets            = 10
)

// CircuitBreaker stops calling a failing dependency for a while, so it can
// recover and callers fail fast instead of waiting on it. Closed, it counts
// outcomes over a rolling SamplingDuration (ten buckets); when at least
// MinimumThroughput executions were seen and at least FailureRatio of them
// were handled failures, it opens. Open, it rejects every execution with a
// *BrokenCircuitError carrying the time left. When BreakDuration has
// passed, the next execution becomes the single probe (half-open); while
// it runs the others are rejected. A probe that fails opens the circuit
// again; one that succeeds closes it with fresh statistics. If a probe is
// still running after another BreakDuration, one more probe is let
// through, so a hung probe cannot hold the circuit half-open forever.
// Isolate holds it open by hand (BrokenCircuitError.Isolated) until Close.
//
// Outcomes of executions that started in an earlier state (a slow call
// admitted while closed that returns after the circuit opened) are ignored.
// Elapsed time is read from the monotonic clock only (time.Since from the
// breaker's creation), so wall-clock jumps do not open or close it.
//
// It is a ResultStrategy[T]; the same breaker may be added to several
// pipelines of T, which then share its state. Safe for concurrent use.
// Create it with NewCircuitBreaker or Builder.AddCircuitBreaker. A panic
// in the callback, like a cancellation by the
// caller (see ShouldHandle), counts as neither success nor failure and
// leaves the state as it was, except that such a probe frees the probe
// slot for the next execution.
type CircuitBreaker[T any] struct {
	opts     CircuitBreakerOptions[T] // as given, for validate
	name     string
	ratio    float64
	minThru  int
	sampling time.Duration
	brk      time.Duration
	handle   func(Outcome[T]) bool

	// closedGen is gen+1 while the state is closed and 0 otherwise,
	// written under mu at every transition, so admitting an execution to
	// a closed circuit (the common case) takes no lock.
	closedGen atomic.Uint64

	// epoch anchors the clock: times are offsets from it, read with
	// time.Since, which uses the monotonic clock alone (one clock read
	// instead of time.Now's two, on the success path).
	epoch time.Time

	mu          sync.Mutex
	state       CircuitState
	gen         uint64        // bumped on every transition; stale outcomes are ignored
	openedUntil time.Duration // open: when a probe may run; half-open: when another may
	halfOpens   int           // consecutive failed probes
	window      healthWindow
}

// NewCircuitBreaker returns a closed circuit breaker configured by opts, or
// a *ConfigError naming the first invalid option.
func NewCircuitBreaker[T any](opts CircuitBreakerOptions[T]) (*CircuitBreaker[T], error) {
	cb := newCircuitBreaker(opts)
	if err := cb.validate(); err != nil {
		return nil, err
	}
	return cb, nil
}

// newCircuitBreaker applies the defaults without validating; Build
// validates.
func newCircuitBreaker[T any](opts CircuitBreakerOptions[T]) *CircuitBreaker[T] {
	cb := &CircuitBreaker[T]{
		opts:     opts,
		name:     opts.Name,
		ratio:    opts.FailureRatio,
		minThru:  opts.MinimumThroughput,
		sampling: opts.SamplingDuration,
		brk:      opts.BreakDuration,
		handle:   opts.ShouldHandle,
	}
	if cb.name == "" {
		cb.name = "CircuitBreaker"
	}
	if cb.ratio == 0 {
		cb.ratio = defaultFailureRatio
	}
	if cb.minThru == 0 {
		cb.minThru = defaultMinimumThroughput
	}
	if cb.sampling <= 0 {
		cb.sampling = defaultSamplingDuration
	}
	if cb.brk <= 0 {
		cb.brk = defaultBreakDuration
	}
	if cb.handle == nil {
		cb.handle = handlesFailure[T]
	}
	cb.window.width = cb.sampling / healthBuckets
	cb.closedGen.Store(1)
	cb.epoch = time.Now()
	return cb
}

// AddCircuitBreaker appends a new circuit breaker configured by opts. To
// read its state or isolate it, make it with NewCircuitBreaker and add it
// with AddResultStrategy instead.
func (b *Builder[T]) AddCircuitBreaker(opts CircuitBreakerOptions[T]) *Builder[T] {
	return b.AddResultStrategy(newCircuitBreaker(opts))
}

// validate reports invalid options as a *ConfigError.
func (cb *CircuitBreaker[T]) validate() error {
	o := cb.opts
	if o.FailureRatio != 0 && !(o.FailureRatio > 0 && o.FailureRatio <= 1) {
		return configErrorf("CircuitBreakerOptions.FailureRatio", "must be in (0, 1], got %v", o.FailureRatio)
	}
	if o.MinimumThroughput != 0 && o.MinimumThroughput < 2 {
		return configErrorf("CircuitBreakerOptions.MinimumThroughput", "must be at least 2, got %d", o.MinimumThroughput)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"CircuitBreakerOptions.SamplingDuration", o.SamplingDuration},
		{"CircuitBreakerOptions.BreakDuration", o.BreakDuration},
	} {
		if err := checkNonNegativeDuration(f.name, f.d); err != nil {
			return err
		}
		if f.d != 0 && f.d < minCircuitDuration {
			return configErrorf(f.name, "must be at least %v, got %v", minCircuitDuration, f.d)
		}
	}
	return nil
}

// strategyName is the name used in telemetry (see StrategyName).
func (cb *CircuitBreaker[T]) strategyName() string { return cb.name }

// State returns the current state. An open circuit whose break has passed
// reports CircuitOpen until an execution arrives to probe it.
func (cb *CircuitBreaker[T]) State() CircuitState {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return cb.state
}

// transition is a state change to report once the lock is released.
type transition[T any] struct {
	name event.Name
	args CircuitArgs[T]
}

// ExecuteResult implements ResultStrategy.
func (cb *CircuitBreaker[T]) ExecuteResult(ctx context.Context, tel Telemetry, next ResultNext[T]) (T, error) {
	gen, probe, tr, err := cb.admit()
	if tr != nil {
		cb.report(ctx, tel, tr)
	}
	if err != nil {
		var zero T
		return zero, err
	}
	done := false
	if probe {
		// A panicking probe must not leave the breaker waiting for it.
		defer func() {
			if !done {
				cb.releaseProbe(gen)
			}
		}()
	}
	v, err := next(ctx)
	if err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil {
		// The caller gave up: nothing learned about the dependency. A
		// probe's slot is freed by the deferred release.
		return v, err
	}
	tr = cb.record(gen, Outcome[T]{Value: v, Err: err})
	done = true
	if tr != nil {
		cb.report(ctx, tel, tr)
	}
	return v, err
}

// admit decides whether an execution may run. It returns the generation
// the execution belongs to and whether it is the half-open probe.
func (cb *CircuitBreaker[T]) admit() (gen uint64, probe bool, tr *transition[T], err error) {
	if g := cb.closedGen.Load(); g != 0 {
		return g - 1, false, nil, nil
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	switch cb.state {
	case CircuitClosed:
		return cb.gen, false, nil, nil
	case CircuitIsolated:
		return 0, false, nil, errIsolatedCircuit
	}
	now := time.Since(cb.epoch)
	if left := cb.openedUntil - now; left > 0 {
		if cb.state == CircuitHalfOpen {
			left = 0 // a probe is running; its outcome decides
		}
		return 0, false, nil, &BrokenCircuitError{RetryAfter: left}
	}
	// The break (or a probe's time) is over: this execution probes.
	if cb.state == CircuitOpen {
		tr = &transition[T]{name: event.CircuitHalfOpened}
	}
	cb.setStateLocked(CircuitHalfOpen)
	cb.openedUntil = now + cb.brk
	return cb.gen, true, tr, nil
}

// record applies an outcome of generation gen.
func (cb *CircuitBreaker[T]) record(gen uint64, o Outcome[T]) *transition[T] {
	failed := cb.handle(o)
	cb.mu.Lock()
	a, open, tr := cb.recordLocked(gen, o, failed)
	if !open {
		cb.mu.Unlock()
		return tr
	}
	g := cb.opts.BreakDurationGenerator
	if g == nil {
		tr = cb.openLocked(o, a, cb.brk)
		cb.mu.Unlock()
		return tr
	}
	// The generator is user code: run it unlocked, so it may read State
	// (or block) without stalling the breaker, and apply its result only
	// if nothing changed meanwhile.
	cb.mu.Unlock()
	d := cb.brk
	if gd := g(a); gd > 0 {
		d = min(gd, maxDuration)
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if gen != cb.gen {
		return nil // another outcome, a probe or Isolate/Close got there first
	}
	return cb.openLocked(o, a, d)
}

// recordLocked applies an outcome of generation gen, except that when it
// must open the circuit it returns open and the generator's arguments
// instead, for record to open it.
func (cb *CircuitBreaker[T]) recordLocked(gen uint64, o Outcome[T], failed bool) (a BreakDurationArgs, open bool, tr *transition[T]) {
	if gen != cb.gen {
		return a, false, nil // from an earlier state
	}
	switch cb.state {
	case CircuitClosed:
		now := time.Since(cb.epoch)
		cb.window.add(now, failed)
		if !failed {
			return a, false, nil
		}
		total, fails := cb.window.totals(now, cb.sampling)
		rate := float64(fails) / float64(total)
		if total < cb.minThru || rate < cb.ratio {
			return a, false, nil
		}
		return BreakDurationArgs{FailureRate: rate, FailureCount: fails}, true, nil
	case CircuitHalfOpen:
		if failed {
			return BreakDurationArgs{FailureRate: 1, FailureCount: 1, HalfOpenAttempts: cb.halfOpens + 1}, true, nil
		}
		cb.closeLocked()
		return a, false, &transition[T]{name: event.CircuitClosed, args: CircuitArgs[T]{Outcome: o}}
	}
	return a, false, nil
}

// releaseProbe lets the next execution probe at once after a probe
// panicked or was cancelled by its caller.
func (cb *CircuitBreaker[T]) releaseProbe(gen uint64) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if gen == cb.gen && cb.state == CircuitHalfOpen {
		cb.openedUntil = 0
	}
}

// openLocked opens the circuit for d after the outcome o, whose failure
// statistics are a.
func (cb *CircuitBreaker[T]) openLocked(o Outcome[T], a BreakDurationArgs, d time.Duration) *transition[T] {
	if cb.state == CircuitHalfOpen {
		cb.halfOpens = a.HalfOpenAttempts
	}
	cb.setStateLocked(CircuitOpen)
	cb.openedUntil = time.Since(cb.epoch) + d
	return &transition[T]{name: event.CircuitOpened, args: CircuitArgs[T]{Outcome: o, BreakDuration: d}}
}

// setStateLocked moves to state s in a new generation.
func (cb *CircuitBreaker[T]) setStateLocked(s CircuitState) {
	cb.state = s
	cb.gen++
	if s == CircuitClosed {
		cb.closedGen.Store(cb.gen + 1)
	} else {
		cb.closedGen.Store(0)
	}
}

func (cb *CircuitBreaker[T]) closeLocked() {
	cb.setStateLocked(CircuitClosed)
	cb.halfOpens = 0
	cb.openedUntil = 0
	cb.window.reset()
}

// Isolate opens the circuit by hand and holds it open: every execution is
// rejected with a *BrokenCircuitError whose Isolated is set, until Close. Use it to take a
// dependency out of service (maintenance, a known outage). Isolate and
// Close run outside any pipeline, so they emit no telemetry event; they
// call OnOpened and OnClosed with Manual set and ctx.
func (cb *CircuitBreaker[T]) Isolate(ctx context.Context) {
	cb.mu.Lock()
	was := cb.state
	cb.setStateLocked(CircuitIsolated)
	cb.mu.Unlock()
	if was != CircuitIsolated && cb.opts.OnOpened != nil {
		cb.opts.OnOpened(ctx, CircuitArgs[T]{Manual: true})
	}
}

// Close closes the circuit by hand, from any state, with fresh statistics.
func (cb *CircuitBreaker[T]) Close(ctx context.Context) {
	cb.mu.Lock()
	was := cb.state
	cb.closeLocked()
	cb.mu.Unlock()
	if was != CircuitClosed && cb.opts.OnClosed != nil {
		cb.opts.OnClosed(ctx, CircuitArgs[T]{Manual: true})
	}
}

// report emits a transition's event and calls its callback.
func (cb *CircuitBreaker[T]) report(ctx context.Context, tel Telemetry, tr *transition[T]) {
	var fn func(context.Context, CircuitArgs[T])
	switch tr.name {
	case event.CircuitOpened:
		fn = cb.opts.OnOpened
	case event.CircuitClosed:
		fn = cb.opts.OnClosed
	case event.CircuitHalfOpened:
		fn = cb.opts.OnHalfOpened
	}
	tel.Emit(ctx, event.Event{Name: tr.name, Duration: tr.args.BreakDuration, Err: tr.args.Outcome.Err})
	if fn != nil {
		fn(ctx, tr.args)
	}
}

// errIsolatedCircuit is shared: it carries nothing per execution.
var errIsolatedCircuit = &BrokenCircuitError{Isolated: true}

// healthWindow counts outcomes over a rolling sampling duration in
// healthBuckets buckets, so old outcomes age out a tenth of the window at a
// time without keeping one entry per execution. Memory is fixed.
type healthWindow struct {
	width   time.Duration
	cur     int
	buckets [healthBuckets]healthBucket
}

type healthBucket struct {
	start           time.Duration // offset from the breaker's epoch
	used            bool
	total, failures int
}

func (w *healthWindow) add(now time.Duration, failed bool) {
	b := &w.buckets[w.cur]
	if !b.used || now-b.start >= w.width {
		w.cur = (w.cur + 1) % healthBuckets
		b = &w.buckets[w.cur]
		*b = healthBucket{start: now, used: true}
	}
	b.total++
	if failed {
		b.failures++
	}
}

// totals sums the buckets that started within the sampling duration.
func (w *healthWindow) totals(now, sampling time.Duration) (total, failures int) {
	for i := range w.buckets {
		b := &w.buckets[i]
		if b.used && now-b.start < sampling {
			total += b.total
			failures += b.failures
		}
	}
	return total, failures
}

func (w *healthWindow) reset() { w.buckets = [healthBuckets]healthBucket{} }
