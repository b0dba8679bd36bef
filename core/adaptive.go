package resilience

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strconv"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/internal/config"
	"github.com/ylcnfrht/resilience/core/internal/queue"
	"github.com/ylcnfrht/resilience/core/limit"
)

// LimitOutcome is how an adaptive limiter counts one finished execution;
// an unknown value counts as a sample.
type LimitOutcome uint8

const (
	// LimitSampled: the execution's round-trip time is a latency sample.
	LimitSampled LimitOutcome = iota
	// LimitDropped: the execution is a sign of overload (it timed out); the
	// algorithms lower the limit on it.
	LimitDropped
	// LimitIgnored: the execution says nothing about the service's
	// capacity (the request was invalid, the connection was taken over);
	// no sample.
	LimitIgnored
	// LimitAbandoned: the caller left before the execution finished. The
	// limiter decides: a caller that left after the execution had run
	// longer than twice the latency the limiter considers normal (its
	// slowly rising baseline of window mean round-trip times) is evidence
	// of overload and counts as a drop; one that left sooner (a user who
	// navigated away) says nothing and is ignored. Without a baseline yet,
	// or for an execution that was not timed (see AdaptiveLimiter), it is
	// ignored; a timed one weighs as many drops as the executions it
	// stands for.
	LimitAbandoned
)

// String returns "sample", "drop", "ignore" or "abandon".
func (o LimitOutcome) String() string {
	switch o {
	case LimitSampled:
		return "sample"
	case LimitDropped:
		return "drop"
	case LimitIgnored:
		return "ignore"
	case LimitAbandoned:
		return "abandon"
	}
	return "LimitOutcome(" + strconv.Itoa(int(o)) + ")"
}

// Classifier decides how an adaptive limiter counts an execution: ctx is
// the context the limiter ran it with and err what the rest of the
// pipeline returned. It runs on every execution, so it must be fast, and
// safe for concurrent use; an unknown result counts as a sample. If it
// panics, the permit is returned without a sample and the panic
// propagates.
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
//   - the limiter's context cancelled (the client went away) is
//     LimitAbandoned: overload evidence if the client had waited longer
//     than the limiter expects, ignored otherwise;
//   - a rejection by a strategy inside (ErrRejected) is ignored: it did not
//     measure the service;
//   - any other error is a sample: a failing execution still took time.
func DefaultClassify(ctx context.Context, err error) LimitOutcome {
	if err == nil {
		return LimitSampled
	}
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return LimitDropped
	case context.Canceled:
		return LimitAbandoned
	}
	if errors.Is(err, ErrTimeoutRejected) || errors.Is(err, context.DeadlineExceeded) {
		return LimitDropped
	}
	if errors.Is(err, ErrRejected) || errors.Is(err, context.Canceled) {
		return LimitIgnored
	}
	return LimitSampled
}

const (
	defaultAdaptiveInitialLimit = 20
	defaultAdaptiveMinLimit     = 1
	defaultAdaptiveMaxLimit     = 1000
)

// AdaptiveLimiterOptions configures an AdaptiveLimiter; the zero value of
// each field means its default. Its functions are called concurrently and
// must be safe for that.
type AdaptiveLimiterOptions struct {
	// Name labels the strategy's events. Default "AdaptiveLimiter".
	Name string
	// Algorithm computes the limit from the samples; nil means a new
	// limit.Gradient2 with its defaults. An algorithm holds state: give
	// each limiter its own value.
	Algorithm limit.Algorithm
	// InitialLimit is the limit before the first sample; 0 means 20.
	InitialLimit int
	// MinLimit is the floor of the limit; 0 means 1. A floor above 1 keeps
	// the service admitting work when latency rises for reasons the
	// limit cannot fix (a slow dependency), instead of shedding almost
	// everything until latency recovers.
	MinLimit int
	// MaxLimit is the ceiling of the limit; 0 means 1000.
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
	// IgnoreCPUWait turns off the CPU gate: by default, while the
	// process's goroutines wait longer for a CPU than the limiter's normal
	// latency (and at least 1 ms), the limiter refuses a share of new
	// executions even with permits free, since a CPU-bound service queues
	// its requests in Go's scheduler, where no permit shows them (see
	// AdaptiveLimiter). Set it for a limiter in front of a remote
	// dependency, whose overload this process's CPU says nothing about.
	IgnoreCPUWait bool
}

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
//   - A CPU-bound service queues its requests in Go's scheduler before
//     they reach any limiter: a handler that computes runs until it is
//     done, so no more of them are in flight than there are Ps
//     (GOMAXPROCS), however many requests wait in the run queue, and the
//     latency the limiter times stays flat while every client waits. No
//     limit can shed that queue, so the limiter also has a CPU gate: at
//     most every 10 ms it reads from the runtime how long a goroutine
//     made runnable waits for a CPU (the mean scheduler latency since the
//     last reading, or the run queue's drain time if longer), and while
//     that exceeds its normal latency (at least 1 ms) it admits only a
//     share of the executions that find a permit free, rejecting the
//     others at once (ErrRejected, ReasonFull; a rejection costs the CPU
//     little). The share falls by a tenth per reading over the bound (up
//     to a half, far over it) and grows back by 1/32 per reading within
//     it, never below 1/16, so it settles where the CPU just keeps up.
//     See AdaptiveLimiterOptions.IgnoreCPUWait.
//   - Latency that rises for reasons concurrency cannot fix (a slow
//     dependency) still lowers the limit; MinLimit is the floor that keeps
//     the service admitting work meanwhile. The baseline follows such a
//     change once the limit is at MinLimit or the service is below half
//     its limit.
//
// Safe for concurrent use; pipelines that share one share its permits and
// its limit. Create it with NewAdaptiveLimiter; the zero value rejects
// every execution. A rejection, cancellation or panic returns the permit
// and queue place (a panic is not a sample).
type AdaptiveLimiter struct {
	// Finished executions are summarised per sampling window (at least one
	// mean round-trip time, a millisecond and ten samples, or the limit if
	// smaller; at most a second; the first window closes after ten samples)
	// and each window is handed to the limit.Algorithm, which returns the new
	// limit; the limiter clamps it to [MinLimit, MaxLimit]. Windows rather
	// than single samples keep the per-execution cost to a few additions under
	// the lock the release takes anyway, and give the algorithms a mean that
	// is far less noisy than one request's latency.
	//
	// Timing is sampled at high throughput. Reading the monotonic clock twice
	// per execution would cost more than the rest of acquire and release
	// together, so the limiter times every execution only until the current
	// window has started 64 timed ones; after that it times one execution in
	// 16, picked under the acquire lock by a fixed-seed pseudo-random sequence
	// (reproducible, yet not in step with traffic that cycles through routes),
	// and an untimed execution reads no clock at all. Each timed execution
	// weighs the inverse of the chance it had to be timed (1 or 16) in the
	// window's mean, and the choice is made before its latency exists, so the
	// mean is an unbiased estimate of the mean over every execution in the
	// window. Drops and the in-flight maximum are counted for every execution,
	// timed or not; only a timed release can close a window, since only it
	// holds a clock reading, and a window with samples closes only once it
	// has timed ones. A service with fewer than 64 executions per window (in
	// flight stays below 64, by Little's law) is timed in full, so the
	// sampling applies only where the clock's cost matters. MinRTT is the
	// minimum over timed executions. Executions that waited in the queue are
	// always timed.

	name     string
	opts     AdaptiveLimiterOptions // as given, for validate
	alg      limit.Algorithm
	classify Classifier
	minLimit int
	maxLimit int
	epoch    time.Time // the limiter's clock reads are offsets from it

	engine queue.Engine // its lock also guards the fields below

	estimate float64 // the algorithm's limit, unrounded
	// baseRTT is the latency the limiter considers normal, for judging
	// abandoned executions: it falls at once to a lower window mean RTT
	// and rises by baseRTTRise per window otherwise, so a collapse (every
	// window slower than the last) cannot talk it up quickly. 0 until the
	// first window with samples.
	baseRTT  int64
	win      sampleWindow
	updating bool          // a window is with the algorithm, or the gate reads the CPU; the next waits
	pick     uint64        // xorshift state choosing the sparsely timed executions
	cpu      cpuReader     // nil with IgnoreCPUWait; read by one update at a time
	cpuRead  int64         // clock offset of the last CPU-wait reading
	cpuWait  time.Duration // the last reading, for limit.Sample.CPUWait
	// admit is the CPU gate's share of executions admitted with a permit
	// free, in 1/gateScale (gateScale: all); credit accumulates it, so
	// the refused ones are spread evenly.
	admit, credit uint32
}

// gateScale is the CPU gate's unit: admit = gateScale lets every
// execution in.
const gateScale = 1 << 16

const (
	gateMin      = gateScale / 16 // the gate never admits less than this share
	gateRecover  = gateScale / 32 // growth per reading within the bound
	cpuReadEvery = int64(10 * time.Millisecond)
)

// denseTimed is the number of executions a window times in full before
// timing only one in sparseEvery.
const denseTimed = 64

// sparseEvery is the share of executions timed once a window has
// denseTimed: one in sparseEvery. It is a power of two so the pick is a
// mask.
const sparseEvery = 16

// maxWindow bounds a sampling window, so that a slow or quiet service
// still adapts about once a second.
const maxWindow = int64(time.Second)

// minWindow bounds a sampling window from below: updating the limit more
// often than every millisecond gains nothing and would put the algorithm
// on the hot path of very fast services.
const minWindow = int64(time.Millisecond)

// baseRTTRise is how fast the abandonment baseline follows latency up:
// 1/64 of itself per window, doubling in about 45 windows.
const baseRTTRise = 64

// abandonFactor is how many times the baseline a caller must have waited
// for its leaving to count as overload.
const abandonFactor = 2

// windowMinSamples is the number of samples a window needs (or the limit,
// if smaller) before it may close.
const windowMinSamples = 10

// sampleWindow accumulates the executions finished since the last update.
type sampleWindow struct {
	start       int64 // clock offset at which the window opened
	length      int64 // the window closes after this long: the last mean RTT
	samples     int   // every execution counted as a sample, timed or not
	drops       int
	timed       int   // the samples among them that were timed
	rttSum      int64 // weighted sum of the timed samples' round-trip times
	rttWeight   int64 // sum of their weights
	minRTT      int64
	maxInFlight int
	started     int // timed executions started since the window opened
}

// NewAdaptiveLimiter returns a limiter configured by opts, or a
// *ConfigError naming the first invalid field.
func NewAdaptiveLimiter(opts AdaptiveLimiterOptions) (*AdaptiveLimiter, error) {
	if err := validateAdaptiveOptions(opts); err != nil {
		return nil, err
	}
	a := &AdaptiveLimiter{
		admit:    gateScale,
		name:     opts.Name,
		opts:     opts,
		alg:      opts.Algorithm,
		classify: opts.Classify,
		minLimit: defaultInt(opts.MinLimit, defaultAdaptiveMinLimit),
		maxLimit: defaultInt(opts.MaxLimit, defaultAdaptiveMaxLimit),
		epoch:    time.Now(),
		pick:     0x9e3779b97f4a7c15, // any non-zero seed
	}
	if !opts.IgnoreCPUWait {
		if w := newCPUWait(); w != nil { // nil: a runtime without the metrics
			a.cpu = w
		}
	}
	if a.name == "" {
		a.name = "AdaptiveLimiter"
	}
	if a.alg == nil {
		a.alg, _ = limit.NewGradient2(limit.Gradient2Options{}) // defaults are valid
	}
	if a.classify == nil {
		a.classify = DefaultClassify
	}
	initial := min(max(defaultInt(opts.InitialLimit, defaultAdaptiveInitialLimit), a.minLimit), a.maxLimit)
	a.estimate = float64(initial)
	a.engine.Init(engineOptions(initial, opts.QueueLimit, opts.QueueTimeout, opts.Priority, opts.Overflow, opts.CoDel))
	return a, nil
}

// AddAdaptiveLimiter appends a new adaptive limiter configured by opts. To
// read its live limit (Stats), build it with
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
	minL := defaultInt(o.MinLimit, defaultAdaptiveMinLimit)
	maxL := defaultInt(o.MaxLimit, defaultAdaptiveMaxLimit)
	if minL > maxL {
		return configErrorf(t+"MinLimit", "must not exceed MaxLimit (%d), got %d", maxL, minL)
	}
	if o.InitialLimit != 0 && (o.InitialLimit < minL || o.InitialLimit > maxL) {
		return configErrorf(t+"InitialLimit", "must be between MinLimit (%d) and MaxLimit (%d), got %d", minL, maxL, o.InitialLimit)
	}
	if err := checkNonNegativeDuration(t+"QueueTimeout", o.QueueTimeout); err != nil {
		return err
	}
	if _, err := ParseOverflowPolicy(string(o.Overflow)); err != nil {
		return config.Rename(t+"Overflow", err)
	}
	if err := validateCoDel("AdaptiveLimiterOptions", o.CoDel); err != nil {
		return err
	}
	if nilAlgorithm(o.Algorithm) {
		return configErrorf(t+"Algorithm", "is a nil %T", o.Algorithm)
	}
	return validateStrategy(o.Algorithm)
}

// nilAlgorithm reports a nil pointer to one of package limit's
// algorithms (their zero values work; a nil pointer cannot hold state).
func nilAlgorithm(alg limit.Algorithm) bool {
	switch a := alg.(type) {
	case *limit.Gradient2:
		return a == nil
	case *limit.Vegas:
		return a == nil
	case *limit.AIMD:
		return a == nil
	}
	return false
}

// validate reports invalid options as a *ConfigError. A limiter made by
// NewAdaptiveLimiter is always valid; the zero value is not.
func (a *AdaptiveLimiter) validate() error {
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
func (a *AdaptiveLimiter) Stats() LimiterStats { return engineStats(&a.engine) }

// AdaptivePermit is a permit taken by AdaptiveLimiter.Acquire. It is a
// small value; copying it is fine, but Release must be called exactly once
// per permit, from any goroutine. Acquire and TryAcquire return the zero
// AdaptivePermit when they fail: it holds nothing, and releasing it panics.
type AdaptivePermit struct {
	l      *AdaptiveLimiter
	start  int64 // clock offset at the grant; unset when weight is 0
	weight int64 // 0: untimed; otherwise the inverse of its chance to be timed
}

// Release returns the permit and counts the execution as o: its round-trip
// time since Acquire is a sample (LimitSampled; at high throughput only
// some permits carry a start time, see AdaptiveLimiter), it signals
// overload (LimitDropped), or it is not counted (LimitIgnored). Releasing
// the zero AdaptivePermit, or a permit twice, is a bug in the caller and
// panics when the limiter notices it (no permit held).
//
// The release that closes a sampling window runs the limit.Algorithm. If
// the algorithm panics, the panic stops there: the previous limit stands,
// the permit is returned all the same, and Release returns a
// *HookPanicError for the caller to report; otherwise it returns nil.
func (p AdaptivePermit) Release(o LimitOutcome) error {
	if p.l == nil {
		panic("resilience: AdaptivePermit.Release of a zero permit")
	}
	if err := p.l.release(p, o); err != nil {
		return err
	}
	return nil
}

// Acquire takes a permit, queueing for one if the options allow, like
// ConcurrencyLimiter.Acquire, and returns it. The caller must call
// Release on it exactly once. The round-trip time is measured from the
// moment the permit is granted, so queueing is not counted as latency.
func (a *AdaptiveLimiter) Acquire(ctx context.Context) (AdaptivePermit, error) {
	p, _, err := a.begin(ctx, nil)
	return p, err
}

// Close stops admission for good, as ConcurrencyLimiter.Close does:
// queued and later executions are rejected with ReasonShuttingDown, and
// running ones release their permits as usual.
func (a *AdaptiveLimiter) Close() { a.engine.Close() }

// TryAcquire takes a permit if one is free and nobody is waiting; it never
// queues.
func (a *AdaptiveLimiter) TryAcquire() (AdaptivePermit, bool) {
	a.engine.Lock()
	if !a.engine.FreeLocked() || !a.gateLocked() {
		a.engine.Unlock()
		return AdaptivePermit{}, false
	}
	a.engine.TakeLocked()
	weight := a.timingLocked()
	a.engine.Unlock()
	return a.permit(weight), true
}

// begin takes a permit like ConcurrencyLimiter.Acquire and decides, under the
// same lock, whether the execution is timed. It reports how long the
// execution waited in the queue (0 when it did not), for telemetry.
func (a *AdaptiveLimiter) begin(ctx context.Context, tel *Telemetry) (AdaptivePermit, time.Duration, error) {
	if ctx.Err() != nil {
		return AdaptivePermit{}, 0, context.Cause(ctx)
	}
	rank := a.opts.Priority
	if p := rank; p != nil && tel != nil {
		rank = func(ctx context.Context) int { return callPriority(ctx, tel, p) }
	}
	a.engine.Lock()
	if a.engine.FreeLocked() {
		if !a.gateLocked() {
			a.engine.Unlock()
			return AdaptivePermit{}, 0, errLimitFull
		}
		a.engine.TakeLocked()
		weight := a.timingLocked()
		a.engine.Unlock()
		return a.permit(weight), 0, nil
	}
	waited, r := a.engine.AcquireSlowLocked(ctx, rank) // unlocks
	if err := engineError(ctx, r); err != nil {
		return AdaptivePermit{}, waited, err
	}
	// A queued execution is already slow; timing it costs nothing that
	// matters, and weight 1 keeps the window's mean unbiased.
	return a.permit(1), waited, nil
}

// gateLocked reports whether the CPU gate lets in an execution that
// found a permit free: always while the CPU keeps up, otherwise the
// gate's share of them, evenly spread. a.mu must be held.
func (a *AdaptiveLimiter) gateLocked() bool {
	if a.admit >= gateScale {
		return true
	}
	a.credit += a.admit
	if a.credit < gateScale {
		return false
	}
	a.credit -= gateScale
	return true
}

// timingLocked decides whether the execution being admitted is timed and
// returns its weight: 1 while the window has fewer than denseTimed timed
// executions, then sparseEvery for one execution in sparseEvery, and 0
// (untimed) for the rest. a.mu must be held.
func (a *AdaptiveLimiter) timingLocked() int64 {
	if a.win.started < denseTimed {
		a.win.started++
		return 1
	}
	x := a.pick
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	a.pick = x
	if x>>60&(sparseEvery-1) == 0 { // the top bits are the best mixed
		return sparseEvery
	}
	return 0
}

// permit returns a permit of the given weight, reading the clock only if
// it is timed.
func (a *AdaptiveLimiter) permit(weight int64) AdaptivePermit {
	if weight == 0 {
		return AdaptivePermit{l: a}
	}
	return AdaptivePermit{l: a, start: a.now(), weight: weight}
}

// now reads the monotonic clock as an offset from the limiter's creation;
// time.Since reads only the monotonic clock, cheaper than time.Now.
func (a *AdaptiveLimiter) now() int64 { return int64(time.Since(a.epoch)) }

// Execute implements Strategy: it takes a permit (or rejects, emitting
// event.ConcurrencyLimiterRejected like ConcurrencyLimiter; a permit after
// queueing emits event.QueueAdmitted), runs next, classifies
// the result and returns the permit. A panic in next, or in the
// Classifier, releases the permit without a sample and propagates to this
// execution's caller. A limit.Algorithm that panics when this execution
// closes a window is contained (see AdaptivePermit.Release) and reported
// as event.HookPanic.
func (a *AdaptiveLimiter) Execute(ctx context.Context, tel Telemetry, next Next) error {
	p, waited, err := a.begin(ctx, &tel)
	if err != nil {
		emitLimiterRejection(ctx, tel, waited, err)
		return err
	}
	emitQueueAdmitted(ctx, tel, waited)
	outcome := LimitIgnored // if next or the classifier panics
	defer func() {
		if herr := a.release(p, outcome); herr != nil {
			tel.Emit(ctx, event.Event{Name: event.HookPanic, Reason: herr.Hook, Err: herr})
		}
	}()
	err = next(ctx)
	outcome = callClassifier(ctx, tel, a.classify, err)
	return err
}

// release returns a permit and records the execution in the window. The
// release that closes a window hands it to the algorithm after unlocking,
// and returns the algorithm's contained panic, if any.
func (a *AdaptiveLimiter) release(p AdaptivePermit, o LimitOutcome) *HookPanicError {
	var now int64
	if p.weight > 0 {
		now = a.now()
	}
	a.engine.Lock()
	inFlight := a.engine.InFlightLocked()
	if !a.engine.ReleaseLocked() {
		a.engine.Unlock()
		panic("resilience: AdaptiveLimiter permit released without being held")
	}
	w := &a.win
	weight := int64(1)
	if o == LimitAbandoned {
		// Only a timed execution knows how long it ran; it stands for
		// weight executions, as in the mean.
		if p.weight == 0 || a.baseRTT == 0 || now-p.start <= abandonFactor*a.baseRTT {
			o = LimitIgnored
		} else {
			o, weight = LimitDropped, p.weight
		}
	}
	if o == LimitIgnored {
		a.engine.Unlock()
		return nil
	}
	if o == LimitDropped {
		w.drops += int(weight)
	} else {
		w.samples++
		if p.weight > 0 {
			rtt := max(now-p.start, 0)
			w.timed++
			w.rttSum += rtt * p.weight
			w.rttWeight += p.weight
			if w.minRTT == 0 || rtt < w.minRTT {
				w.minRTT = rtt
			}
		}
	}
	if inFlight > w.maxInFlight {
		w.maxInFlight = inFlight
	}
	// Only a timed release knows the time, so only it may close the
	// window; and a window with samples needs timed ones for its mean
	// (when every execution is timed, both always hold).
	// The CPU gate reads the scheduler at most every cpuReadEvery, on a
	// timed release, whether or not a window closes: windows of a slow or
	// throttled service are long, and the gate must close within tens of
	// milliseconds of the run queue growing.
	if p.weight == 0 || a.updating {
		a.engine.Unlock()
		return nil
	}
	readCPU := a.cpu != nil && now-a.cpuRead >= cpuReadEvery
	if readCPU {
		a.cpuRead = now
	}
	cpuBound := time.Duration(max(a.baseRTT, int64(minCPUWait)))
	if !w.closes(now, a.engine.LimitLocked()) {
		if !readCPU {
			a.engine.Unlock()
			return nil
		}
		a.updating = true
		a.engine.Unlock()
		a.gateUpdate(cpuBound)
		return nil
	}
	s := limit.Sample{
		Limit:    a.estimate,
		MinLimit: a.minLimit,
		MaxLimit: a.maxLimit,
		InFlight: w.maxInFlight,
		Samples:  w.samples,
		Drops:    w.drops,
		MinRTT:   time.Duration(w.minRTT),
		CPUWait:  a.cpuWait,
	}
	if w.samples > 0 {
		s.RTT = time.Duration(w.rttSum / w.rttWeight)
		if rtt := int64(s.RTT); a.baseRTT == 0 || rtt < a.baseRTT {
			a.baseRTT = rtt
		} else {
			a.baseRTT += max(a.baseRTT/baseRTTRise, 1)
			a.baseRTT = min(a.baseRTT, rtt)
		}
	}
	length := w.length
	if w.samples > 0 {
		length = min(max(int64(s.RTT), minWindow), maxWindow)
	}
	*w = sampleWindow{start: now, length: max(length, minWindow)}
	a.updating = true
	a.engine.Unlock()
	return a.update(s, readCPU, cpuBound)
}

// closes reports whether a timed release at now closes the window: it has
// lasted maxWindow, or it holds enough outcomes (timed ones among them)
// and has lasted its length. A window with samples but none timed has no
// mean yet and stays open.
func (w *sampleWindow) closes(now int64, limit int) bool {
	if w.samples > 0 && w.timed == 0 {
		return false
	}
	elapsed := now - w.start
	if elapsed >= maxWindow {
		return true
	}
	n := w.samples + w.drops
	return n >= min(windowMinSamples, limit) && w.timed >= min(windowMinSamples, w.samples) && elapsed >= w.length
}

// minCPUWait is the CPU wait below which the CPU gate never closes: Go's
// scheduler lets a goroutine run 10 ms before preempting it, so waits of
// a millisecond are ordinary on a busy process.
const minCPUWait = time.Millisecond

// update runs the algorithm outside the lock and applies its limit. The
// updating flag keeps windows in order (one update at a time) and is
// cleared even if a user's algorithm panics. Such a panic is recovered
// here, on whichever execution closed the window, because it would
// otherwise fail that unrelated execution: the previous limit stands and
// the panic comes back as a *HookPanicError.
//
// With readCPU it also reads the CPU wait first (see readGate), so that
// the window reports it.
func (a *AdaptiveLimiter) update(s limit.Sample, readCPU bool, cpuBound time.Duration) (err *HookPanicError) {
	next := s.Limit
	defer func() {
		if v := recover(); v != nil {
			next = s.Limit
			err = &HookPanicError{Hook: event.HookLimitAlgorithm, Value: v}
		}
		if math.IsNaN(next) || math.IsInf(next, 0) {
			next = s.Limit
		}
		next = min(max(next, float64(a.minLimit)), float64(a.maxLimit))
		a.engine.Lock()
		a.updating = false
		a.estimate = next
		if n := int(next); n != a.engine.LimitLocked() {
			a.engine.SetLimitLocked(n)
		}
		a.engine.Unlock()
	}()
	if readCPU {
		s.CPUWait = a.readGate(cpuBound)
	}
	next = a.alg.Update(s)
	return nil
}

// gateUpdate reads the CPU wait between two windows (see readGate) and
// hands the next update over.
func (a *AdaptiveLimiter) gateUpdate(cpuBound time.Duration) {
	a.readGate(cpuBound)
	a.engine.Lock()
	a.updating = false
	a.engine.Unlock()
}

// readGate reads the CPU wait (runtime metrics, a few microseconds), off
// every request's path and at most every cpuReadEvery: how long a
// goroutine made runnable now can expect to wait for a CPU, from the
// scheduling since the last reading and the run queue now (see
// cpuWait.read). A reading over cpuBound (the limiter's normal
// latency, at least minCPUWait) narrows the CPU gate, one within it widens
// it (see gateAfter). It returns the reading. Called with the updating
// flag set, so one at a time.
func (a *AdaptiveLimiter) readGate(cpuBound time.Duration) time.Duration {
	wait := a.cpu.read(runtime.GOMAXPROCS(0))
	admit := a.gateAfter(wait, cpuBound)
	a.engine.Lock()
	a.admit, a.cpuWait = admit, wait
	a.engine.Unlock()
	return wait
}

// gateAfter returns the CPU gate's next share after a reading of wait
// against bound, within [gateMin, gateScale]: over the bound it falls by a
// tenth, and by up to a half as the wait reaches ten times the bound (a
// long run queue drains fast, since a refused request costs little);
// within half the bound it grows by gateRecover, and by a quarter of that
// between half the bound and the bound, so that it settles just below the
// share the CPU can serve. Only readGate calls it, one at a time.
func (a *AdaptiveLimiter) gateAfter(wait, bound time.Duration) uint32 {
	g := uint64(a.admit) // no lock: only readGate writes it, under the lock
	switch {
	case wait > bound:
		// Keep 1 - wait/(20·bound) of the share, between 1/2 and 9/10.
		cut := min(uint64(wait)*gateScale/(20*uint64(bound)), gateScale/2)
		keep := min(gateScale-cut, gateScale*9/10)
		g = max(g*keep/gateScale, gateMin)
	case wait > bound/2:
		g = min(g+gateRecover/4, gateScale)
	default:
		g = min(g+gateRecover, gateScale)
	}
	return uint32(g)
}

// callClassifier runs classify for one execution: a panic of the
// classifier is reported on tel as event.HookPanic (event.HookClassifier) and
// then goes on to the execution's caller unchanged.
func callClassifier(ctx context.Context, tel Telemetry, classify Classifier, err error) LimitOutcome {
	defer reportHookPanic(ctx, &tel, event.HookClassifier)
	return classify(ctx, err)
}
