package resilience

import (
	"context"
	"math"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/internal/config"
	"github.com/ylcnfrht/resilience/core/internal/queue"
	"github.com/ylcnfrht/resilience/core/limit"
)

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
	// QueueLimit, QueueTimeout, Priority, Flow, FlowWeight, Overflow and
	// CoDel work exactly as in ConcurrencyLimiterOptions: the two limiters
	// share one queue engine (permits from Acquire are counted to their
	// flow here: the AdaptivePermit knows it). QueueLimit defaults to 0 (no
	// queue).
	QueueLimit   int
	QueueTimeout time.Duration
	Priority     func(ctx context.Context) int
	Flow         func(ctx context.Context) string
	FlowWeight   func(ctx context.Context) int
	Overflow     OverflowPolicy
	CoDel        *CoDelOptions
	// (There is no Cost: the adaptive limiter takes one permit per
	// execution, since its limit is learnt from the executions' latency,
	// where a costly one already shows; see admission.go. Put costly
	// routes behind a fixed ConcurrencyLimiter with a Cost.)
	//
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
	name     string
	opts     AdaptiveLimiterOptions // as given, for validate
	alg      limit.Algorithm
	classify Classifier
	minLimit int
	maxLimit int
	epoch    time.Time // the limiter's clock reads are offsets from it

	engine queue.Engine // its lock also guards the fields below
	fair   *ranker      // nil without a Flow function

	estimate float64 // the algorithm's limit, unrounded
	// baseRTT is the latency the limiter considers normal, for judging
	// abandoned executions: it falls at once to a lower window mean RTT
	// and rises by baseRTTRise per window otherwise, so a collapse (every
	// window slower than the last) cannot talk it up quickly. 0 until the
	// first window with samples.
	baseRTT  int64
	win      sampleWindow // see adaptive_window.go
	pick     uint64       // xorshift state choosing the sparsely timed executions
	gate     cpuGate
	updating bool // a window is with the algorithm, or the gate reads the CPU; the next waits
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
		minLimit: defaultInt(opts.MinLimit, defaultAdaptiveMinLimit),
		maxLimit: defaultInt(opts.MaxLimit, defaultAdaptiveMaxLimit),
		epoch:    time.Now(),
		pick:     0x9e3779b97f4a7c15, // any non-zero seed
		gate:     newCPUGate(opts.IgnoreCPUWait),
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
	eo := engineOptions(initial, opts.QueueLimit, opts.QueueTimeout, opts.Priority, opts.Overflow, opts.CoDel)
	if opts.Flow != nil && opts.QueueLimit > 0 {
		eo.Fair = true
		a.fair = &ranker{priority: opts.Priority, flow: opts.Flow, weight: opts.FlowWeight}
	}
	a.engine.Init(eo)
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
	if err := validateFlow("AdaptiveLimiterOptions", o.Flow, o.FlowWeight); err != nil {
		return err
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

// strategyName is the name used in telemetry (see StrategyName).
func (a *AdaptiveLimiter) strategyName() string {
	if a.name == "" {
		return "AdaptiveLimiter"
	}
	return a.name
}

// Stats returns a consistent snapshot of the current limit, the permits
// held and the waiters queued. In flight may exceed the limit for a while
// after the limit falls.
func (a *AdaptiveLimiter) Stats() LimiterStats { return engineStats(&a.engine) }

// Bounds returns the limits the adaptive limit moves between: MinLimit
// and MaxLimit with their defaults applied, as the last Reconfigure left
// them. The zero AdaptiveLimiter reports 0, 0.
func (a *AdaptiveLimiter) Bounds() (minLimit, maxLimit int) {
	a.engine.Lock()
	defer a.engine.Unlock()
	return a.minLimit, a.maxLimit
}

// AdaptivePermit is a permit taken by AdaptiveLimiter.Acquire. It is a
// small value; copying it is fine, but Release must be called exactly once
// per permit, from any goroutine. Acquire and TryAcquire return the zero
// AdaptivePermit when they fail: it holds nothing, and releasing it panics.
type AdaptivePermit struct {
	l      *AdaptiveLimiter
	start  int64       // clock offset at the grant; unset when weight is 0
	weight int64       // 0: untimed; otherwise the inverse of its chance to be timed
	flow   *queue.Flow // the flow the permit is counted to, or nil
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
	if !a.engine.FreeLocked() || !a.gate.admitLocked() {
		a.engine.Unlock()
		return AdaptivePermit{}, false
	}
	a.engine.TakeLocked()
	weight := a.win.timing(&a.pick)
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
		if !a.gate.admitLocked() {
			a.engine.Unlock()
			return AdaptivePermit{}, 0, errLimitFull
		}
		a.engine.TakeLocked()
		weight := a.win.timing(&a.pick)
		a.engine.Unlock()
		return a.permit(weight), 0, nil
	}
	var (
		waited time.Duration
		r      queue.Result
		f      *queue.Flow
	)
	if a.fair != nil {
		waited, r, f = a.engine.AcquireRankedSlowLocked(ctx, a.fair.rankFunc(tel), true) // unlocks
	} else {
		waited, r = a.engine.AcquireSlowLocked(ctx, rank) // unlocks
	}
	if err := engineError(ctx, r); err != nil {
		return AdaptivePermit{}, waited, err
	}
	// A queued execution is already slow; timing it costs nothing that
	// matters, and weight 1 keeps the window's mean unbiased.
	p := a.permit(1)
	p.flow = f
	return p, waited, nil
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
// and returns the algorithm's contained panic, if any; a timed release
// may also read the CPU for the gate.
func (a *AdaptiveLimiter) release(p AdaptivePermit, o LimitOutcome) *HookPanicError {
	var now int64
	if p.weight > 0 {
		now = a.now()
	}
	a.engine.Lock()
	inFlight := a.engine.InFlightLocked()
	if !a.engine.ReleaseFlowLocked(p.flow) {
		a.engine.Unlock()
		panic("resilience: AdaptiveLimiter permit released without being held")
	}
	o, weight := resolveAbandoned(o, p.weight, now-p.start, a.baseRTT)
	if o == LimitIgnored {
		a.engine.Unlock()
		return nil
	}
	a.win.record(o, weight, p.start, p.weight, now, inFlight)
	// Only a timed release knows the time, so only it may close the
	// window or read the CPU; one at a time does either.
	if p.weight == 0 || a.updating {
		a.engine.Unlock()
		return nil
	}
	return a.afterTimedReleaseLocked(now)
}

// afterTimedReleaseLocked closes the window if it is due and reads the CPU
// if that is due, and unlocks. The CPU gate reads the scheduler at most
// every cpuReadEvery whether or not a window closes: windows of a slow or
// throttled service are long, and the gate must close within tens of
// milliseconds of the run queue growing.
func (a *AdaptiveLimiter) afterTimedReleaseLocked(now int64) *HookPanicError {
	readCPU := a.gate.dueLocked(now)
	bound := cpuBound(a.baseRTT)
	if !a.win.closes(now, a.engine.LimitLocked()) {
		if !readCPU {
			a.engine.Unlock()
			return nil
		}
		a.updating = true
		a.engine.Unlock()
		a.gateUpdate(bound)
		return nil
	}
	s := a.closeWindowLocked(now)
	a.updating = true
	a.engine.Unlock()
	return a.update(s, readCPU, bound)
}

// closeWindowLocked returns the window that closes at now as a sample,
// moves the baseline, and opens the next window.
func (a *AdaptiveLimiter) closeWindowLocked(now int64) limit.Sample {
	s := a.win.sample(a.estimate, a.minLimit, a.maxLimit, a.gate.wait)
	s.Queued = a.engine.QueuedLocked()
	if a.win.samples > 0 {
		a.baseRTT = nextBaseRTT(a.baseRTT, int64(s.RTT))
	}
	a.win = a.win.next(now, s.RTT)
	return s
}

// update runs the algorithm outside the lock and applies its limit. The
// updating flag keeps windows in order (one update at a time) and is
// cleared even if a user's algorithm panics. Such a panic is recovered
// here, on whichever execution closed the window, because it would
// otherwise fail that unrelated execution: the previous limit stands and
// the panic comes back as a *HookPanicError.
//
// With readCPU it also reads the CPU wait first (see cpuGate.read), so that
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
		a.engine.Lock() // the bounds may change under it (Reconfigure)
		next = min(max(next, float64(a.minLimit)), float64(a.maxLimit))
		a.updating = false
		a.estimate = next
		if n := int(next); n != a.engine.LimitLocked() {
			a.engine.SetLimitLocked(n)
		}
		a.engine.Unlock()
	}()
	if readCPU {
		s.CPUWait = a.gate.read(&a.engine, cpuBound)
	}
	next = a.alg.Update(s)
	return nil
}

// gateUpdate reads the CPU wait between two windows (see cpuGate.read)
// and hands the next update over.
func (a *AdaptiveLimiter) gateUpdate(cpuBound time.Duration) {
	a.gate.read(&a.engine, cpuBound)
	a.engine.Lock()
	a.updating = false
	a.engine.Unlock()
}
