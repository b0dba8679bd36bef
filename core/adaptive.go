package resilience

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"
)

// LimitOutcome is how an adaptive limiter counts one finished execution.
type LimitOutcome uint8

const (
	// LimitSampled: the execution's round-trip time is a latency sample.
	LimitSampled LimitOutcome = iota
	// LimitDropped: the execution is a sign of overload (it timed out); the
	// algorithms lower the limit on it.
	LimitDropped
	// LimitIgnored: the execution says nothing about the service's
	// capacity (the caller gave up, the request was invalid); no sample.
	LimitIgnored
)

// String returns "sample", "drop" or "ignore".
func (o LimitOutcome) String() string {
	switch o {
	case LimitSampled:
		return "sample"
	case LimitDropped:
		return "drop"
	case LimitIgnored:
		return "ignore"
	}
	return "LimitOutcome(" + strconv.Itoa(int(o)) + ")"
}

// Classifier decides how an adaptive limiter counts an execution: ctx is
// the context the limiter ran it with and err what the rest of the
// pipeline returned. It runs on every execution, so it must be fast, and
// safe for concurrent use.
type Classifier func(ctx context.Context, err error) LimitOutcome

// DefaultClassify is the classifier an adaptive limiter uses unless told
// otherwise:
//
//   - success is a sample;
//   - the limiter's own context reaching its deadline (an outer timeout
//     strategy, the inbound timeout, the caller's deadline), a
//     *TimeoutRejectedError from a timeout strategy inside, or a
//     context.DeadlineExceeded returned by the callback is a drop: timeouts
//     are overload, and ignoring them lets the limit climb while every
//     execution times out;
//   - the limiter's context cancelled (the client went away) is ignored, as
//     is a rejection by a strategy inside (ErrRejected): neither measured
//     the service;
//   - any other error is a sample: a failing execution still took time.
func DefaultClassify(ctx context.Context, err error) LimitOutcome {
	if err == nil {
		return LimitSampled
	}
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return LimitDropped
	case context.Canceled:
		return LimitIgnored
	}
	if errors.Is(err, ErrTimeoutRejected) || errors.Is(err, context.DeadlineExceeded) {
		return LimitDropped
	}
	if errors.Is(err, ErrRejected) || errors.Is(err, context.Canceled) {
		return LimitIgnored
	}
	return LimitSampled
}

// Defaults of AdaptiveLimiterOptions.
const (
	DefaultAdaptiveInitialLimit = 20
	DefaultAdaptiveMinLimit     = 1
	DefaultAdaptiveMaxLimit     = 1000
)

// AdaptiveLimiterOptions configures an AdaptiveLimiter. Zero values mean
// the defaults.
type AdaptiveLimiterOptions struct {
	// Name labels the strategy's events. Default "AdaptiveLimiter".
	Name string
	// Algorithm computes the limit from the samples. Default a new
	// Gradient2 with its defaults. An algorithm holds state: give each
	// limiter its own value.
	Algorithm LimitAlgorithm
	// InitialLimit is the limit before the first sample. Default 20.
	InitialLimit int
	// MinLimit is the floor of the limit, default 1. A floor above 1 keeps
	// the service admitting work when latency rises for reasons the
	// limit cannot fix (a slow dependency), instead of shedding almost
	// everything until latency recovers.
	MinLimit int
	// MaxLimit is the ceiling of the limit. Default 1000.
	MaxLimit int
	// QueueLimit, QueueTimeout, Priority, Overflow and CoDel work exactly
	// as in ConcurrencyLimiterOptions: the two limiters share one queue
	// engine. QueueLimit defaults to 0 (no queue).
	QueueLimit   int
	QueueTimeout time.Duration
	Priority     func(ctx context.Context) int
	Overflow     OverflowPolicy
	CoDel        *CoDelOptions
	// Classify says how each finished execution counts. Default
	// DefaultClassify.
	Classify Classifier
}

// LimitProvider reports a limiter's live state: its current limit, the
// permits in use and the executions queued. Health checks, dashboards and
// metrics read it from any goroutine. ConcurrencyLimiter and
// AdaptiveLimiter implement it.
type LimitProvider interface {
	Stats() LimiterStats
}

var (
	_ LimitProvider = (*ConcurrencyLimiter)(nil)
	_ LimitProvider = (*AdaptiveLimiter)(nil)
)

// AdaptiveLimiter is a concurrency limiter whose limit is found while the
// service runs: it raises the limit while latency stays flat and lowers it
// as soon as latency climbs or executions time out. It is a Strategy, and
// can also be used directly through Acquire.
//
// Everything about admission is the fixed ConcurrencyLimiter's: the same
// queue engine, with priorities, the three overflow policies, queue
// timeouts and the optional CoDel discipline. Only the limit moves. A
// lower limit never interrupts running work; it only stops admitting until
// in-flight falls below it.
//
// Finished executions are summarised per sampling window (at least one
// mean round-trip time, a millisecond and ten samples, or the limit if
// smaller; at most a second; the first window closes after ten samples) and each window is handed to the LimitAlgorithm, which returns the
// new limit; the limiter clamps it to [MinLimit, MaxLimit]. Windows rather
// than single samples keep the per-execution cost to a clock read and a few
// additions under the lock the release takes anyway, and give the
// algorithms a mean that is far less noisy than one request's latency.
//
// When to use it instead of the fixed limiter: when the right limit is not
// known or changes (instance sizes, traffic mix, a dependency's speed). A
// fixed limit measured under load is simpler and fully predictable; prefer
// it when you have one. Caveats:
//
//   - The algorithms compare latency with a baseline, so routes with very
//     different latencies belong in separate pipelines (separate
//     limiters): a mix that shifts towards slow routes looks like overload.
//   - Timeouts count as overload (see DefaultClassify). A route whose
//     timeouts are the client's short budget rather than the server's
//     trouble needs its own classifier.
//   - Latency that rises for reasons concurrency cannot fix (a slow
//     dependency) still lowers the limit; MinLimit is the floor that keeps
//     the service admitting work meanwhile. The baseline follows such a
//     change once the limit is at MinLimit or the service is below half
//     its limit.
//
// An AdaptiveLimiter is safe for concurrent use and may be shared by
// pipelines, which then share its permits and its limit. Create it with
// NewAdaptiveLimiter; the zero value rejects every execution with
// ReasonFull and fails Validate. A rejection, cancellation or panic leaves
// no state behind: permits and queue places are always returned (a panic
// is not a sample). Must not be copied after first use.
type AdaptiveLimiter struct {
	name     string
	opts     AdaptiveLimiterOptions // as given, for Validate
	alg      LimitAlgorithm
	classify Classifier
	minLimit int
	maxLimit int
	epoch    time.Time // the limiter's clock reads are offsets from it

	permitEngine // its mu also guards the fields below

	estimate float64 // the algorithm's limit, unrounded
	win      sampleWindow
	updating bool // a window is with the algorithm; the next one waits
}

// maxWindow bounds a sampling window, so that a slow or quiet service
// still adapts about once a second.
const maxWindow = int64(time.Second)

// minWindow bounds a sampling window from below: updating the limit more
// often than every millisecond gains nothing and would put the algorithm
// on the hot path of very fast services.
const minWindow = int64(time.Millisecond)

// windowMinSamples is the number of samples a window needs (or the limit,
// if smaller) before it may close.
const windowMinSamples = 10

// sampleWindow accumulates the executions finished since the last update.
type sampleWindow struct {
	start       int64 // clock offset at which the window opened
	length      int64 // the window closes after this long: the last mean RTT
	samples     int
	drops       int
	rttSum      int64
	minRTT      int64
	maxInFlight int
}

// NewAdaptiveLimiter returns a limiter configured by opts, or a
// *ConfigError naming the first invalid field.
func NewAdaptiveLimiter(opts AdaptiveLimiterOptions) (*AdaptiveLimiter, error) {
	if err := validateAdaptiveOptions(opts); err != nil {
		return nil, err
	}
	a := &AdaptiveLimiter{
		name:     opts.Name,
		opts:     opts,
		alg:      opts.Algorithm,
		classify: opts.Classify,
		minLimit: defaultInt(opts.MinLimit, DefaultAdaptiveMinLimit),
		maxLimit: defaultInt(opts.MaxLimit, DefaultAdaptiveMaxLimit),
		epoch:    time.Now(),
	}
	if a.name == "" {
		a.name = "AdaptiveLimiter"
	}
	if a.alg == nil {
		a.alg, _ = NewGradient2(Gradient2Options{}) // defaults are valid
	}
	if a.classify == nil {
		a.classify = DefaultClassify
	}
	initial := min(max(defaultInt(opts.InitialLimit, DefaultAdaptiveInitialLimit), a.minLimit), a.maxLimit)
	a.estimate = float64(initial)
	a.initEngine(initial, opts.QueueLimit, opts.QueueTimeout, opts.Priority, opts.Overflow, opts.CoDel)
	return a, nil
}

// AddAdaptiveLimiter appends a new adaptive limiter configured by opts. To
// read its live limit (its LimitProvider), build it with
// NewAdaptiveLimiter and add it with AddStrategy instead.
func (b *Builder[T]) AddAdaptiveLimiter(opts AdaptiveLimiterOptions) *Builder[T] {
	a, err := NewAdaptiveLimiter(opts)
	if err != nil {
		return b.addBuilt(nil, err)
	}
	return b.addBuilt(a, nil)
}

func defaultInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func validateAdaptiveOptions(o AdaptiveLimiterOptions) error {
	const t = "AdaptiveLimiterOptions."
	for _, f := range []struct {
		name string
		v    int
	}{{"InitialLimit", o.InitialLimit}, {"MinLimit", o.MinLimit}, {"MaxLimit", o.MaxLimit}, {"QueueLimit", o.QueueLimit}} {
		if err := checkNonNegativeInt(t+f.name, f.v); err != nil {
			return err
		}
	}
	minL := defaultInt(o.MinLimit, DefaultAdaptiveMinLimit)
	maxL := defaultInt(o.MaxLimit, DefaultAdaptiveMaxLimit)
	if minL > maxL {
		return configErrorf(t+"MinLimit", "must not exceed MaxLimit (%d), got %d", maxL, minL)
	}
	if o.InitialLimit != 0 && (o.InitialLimit < minL || o.InitialLimit > maxL) {
		return configErrorf(t+"InitialLimit", "must be between MinLimit (%d) and MaxLimit (%d), got %d", minL, maxL, o.InitialLimit)
	}
	if err := checkNonNegativeDuration(t+"QueueTimeout", o.QueueTimeout); err != nil {
		return err
	}
	if o.Overflow != "" {
		if _, err := ParseOverflowPolicy(string(o.Overflow)); err != nil {
			return &ConfigError{Field: t + "Overflow", Problem: err.(*ConfigError).Problem}
		}
	}
	if err := validateCoDel("AdaptiveLimiterOptions", o.CoDel); err != nil {
		return err
	}
	if v, ok := o.Algorithm.(Validator); ok {
		return v.Validate()
	}
	return nil
}

// Validate reports invalid options as a *ConfigError. A limiter made by
// NewAdaptiveLimiter is always valid; the zero value is not.
func (a *AdaptiveLimiter) Validate() error {
	if a.alg == nil {
		return configErrorf("AdaptiveLimiter", "not created by NewAdaptiveLimiter")
	}
	return validateAdaptiveOptions(a.opts)
}

// StrategyName returns the name used in telemetry.
func (a *AdaptiveLimiter) StrategyName() string {
	if a.name == "" {
		return "AdaptiveLimiter"
	}
	return a.name
}

// Stats returns a consistent snapshot of the current limit, the permits
// held and the waiters queued. In flight may exceed the limit for a while
// after the limit falls.
func (a *AdaptiveLimiter) Stats() LimiterStats { return a.stats() }

// AdaptivePermit is a permit taken by AdaptiveLimiter.Acquire. It is a
// small value; copying it is fine, but Release must be called exactly once
// per permit.
type AdaptivePermit struct {
	l     *AdaptiveLimiter
	start int64
}

// Release returns the permit and counts the execution as o: its round-trip
// time since Acquire is a sample (LimitSampled), it signals overload
// (LimitDropped), or it is not counted (LimitIgnored). Releasing the zero
// AdaptivePermit, or a permit twice, is a bug in the caller and panics
// when the limiter notices it (no permit held).
func (p AdaptivePermit) Release(o LimitOutcome) {
	if p.l == nil {
		panic("resilience: AdaptivePermit.Release of a zero permit")
	}
	p.l.release(p.start, o)
}

// Acquire takes a permit, queueing for one if the options allow, like
// ConcurrencyLimiter.Acquire, and returns it. The caller must call
// Release on it exactly once. The round-trip time is measured from the
// moment the permit is granted, so queueing is not counted as latency.
func (a *AdaptiveLimiter) Acquire(ctx context.Context) (AdaptivePermit, error) {
	if _, err := a.acquire(ctx); err != nil {
		return AdaptivePermit{}, err
	}
	return AdaptivePermit{l: a, start: a.now()}, nil
}

// TryAcquire takes a permit if one is free and nobody is waiting; it never
// queues.
func (a *AdaptiveLimiter) TryAcquire() (AdaptivePermit, bool) {
	if !a.tryAcquire() {
		return AdaptivePermit{}, false
	}
	return AdaptivePermit{l: a, start: a.now()}, true
}

// now reads the monotonic clock as an offset from the limiter's creation;
// time.Since reads only the monotonic clock, cheaper than time.Now.
func (a *AdaptiveLimiter) now() int64 { return int64(time.Since(a.epoch)) }

// Execute implements Strategy: it takes a permit (or rejects, emitting
// EventRateLimiterRejected like ConcurrencyLimiter), runs next, classifies
// the result and returns the permit. A panic in next releases the permit
// without a sample and propagates.
func (a *AdaptiveLimiter) Execute(ctx context.Context, tel Telemetry, next Next) error {
	waited, err := a.acquire(ctx)
	if err != nil {
		emitBulkheadRejection(ctx, tel, waited, err)
		return err
	}
	start := a.now()
	released := false
	defer func() {
		if !released { // next panicked
			a.release(start, LimitIgnored)
		}
	}()
	err = next(ctx)
	released = true
	a.release(start, a.classify(ctx, err))
	return err
}

// release returns a permit and records the execution in the window. The
// release that closes a window hands it to the algorithm after unlocking.
func (a *AdaptiveLimiter) release(start int64, o LimitOutcome) {
	now := a.now()
	a.mu.Lock()
	inFlight := a.inFlight
	if !a.releaseLocked() {
		a.mu.Unlock()
		panic("resilience: AdaptiveLimiter permit released without being held")
	}
	if o == LimitIgnored {
		a.mu.Unlock()
		return
	}
	w := &a.win
	if o == LimitDropped {
		w.drops++
	} else {
		rtt := max(now-start, 0)
		w.samples++
		w.rttSum += rtt
		if w.minRTT == 0 || rtt < w.minRTT {
			w.minRTT = rtt
		}
	}
	if inFlight > w.maxInFlight {
		w.maxInFlight = inFlight
	}
	elapsed := now - w.start
	n := w.samples + w.drops
	if a.updating || !(elapsed >= maxWindow || (n >= min(windowMinSamples, a.limit) && elapsed >= w.length)) {
		a.mu.Unlock()
		return
	}
	s := LimitSample{
		Limit:    a.estimate,
		MinLimit: a.minLimit,
		MaxLimit: a.maxLimit,
		InFlight: w.maxInFlight,
		Samples:  w.samples,
		Drops:    w.drops,
		MinRTT:   time.Duration(w.minRTT),
	}
	if w.samples > 0 {
		s.RTT = time.Duration(w.rttSum / int64(w.samples))
	}
	length := w.length
	if w.samples > 0 {
		length = min(max(int64(s.RTT), minWindow), maxWindow)
	}
	*w = sampleWindow{start: now, length: max(length, minWindow)}
	a.updating = true
	a.mu.Unlock()
	a.update(s)
}

// update runs the algorithm outside the lock and applies its limit. The
// updating flag keeps windows in order (one update at a time) and is
// cleared even if a user's algorithm panics.
func (a *AdaptiveLimiter) update(s LimitSample) {
	next := s.Limit
	defer func() {
		if math.IsNaN(next) || math.IsInf(next, 0) {
			next = s.Limit
		}
		next = min(max(next, float64(a.minLimit)), float64(a.maxLimit))
		a.mu.Lock()
		a.updating = false
		a.estimate = next
		if n := int(next); n != a.limit {
			a.setLimitLocked(n)
		}
		a.mu.Unlock()
	}()
	next = a.alg.Update(s)
}
