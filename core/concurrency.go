package resilience

import (
	"context"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/internal/queue"
)

// OverflowPolicy says what a concurrency limiter does when an execution must
// queue and the queue is already full. Running executions are never
// interrupted to make room. Its values are stable strings for
// configuration files; the empty string means OverflowRejectNew, or
// OverflowDropLowestPriority when the limiter has a Priority function.
type OverflowPolicy string

const (
	// OverflowRejectNew rejects the newcomer with ReasonFull. It is the
	// default without a Priority function. With a Flow function, a
	// newcomer whose flow uses less of the limiter (its waiters at the
	// priority and its permits, per weight), even counting the newcomer,
	// than the waiting flow that uses the most, evicts that flow's newest
	// waiter with ReasonDropped instead.
	OverflowRejectNew OverflowPolicy = "reject-new"
	// OverflowDropOldest evicts the waiter that has waited longest, whatever
	// its priority, with ReasonDropped, and queues the newcomer. Useful when
	// old requests are likely abandoned by their clients anyway. With a
	// Flow function it evicts the oldest waiter of the flow that uses the
	// most (as for reject-new, at any priority; the newcomer's own flow
	// counted with the newcomer, its own oldest going on a tie), or
	// rejects the newcomer with ReasonFull when its flow uses the most
	// through permits alone, with no waiter at its priority.
	OverflowDropOldest OverflowPolicy = "drop-oldest"
	// OverflowDropLowestPriority evicts the newest waiter of the lowest
	// priority (the largest Priority number) with ReasonDropped if the
	// newcomer outranks it (a strictly lower number) and queues the newcomer;
	// otherwise it rejects the newcomer with ReasonFull. Under overload the
	// least important traffic is what gets shed. It is the default with a
	// Priority function: among equal priorities it is reject-new. With a
	// Flow function the waiter evicted is the newest of the lowest
	// priority's flow that uses the most.
	OverflowDropLowestPriority OverflowPolicy = "drop-lowest-priority"
)

// ParseOverflowPolicy returns the policy named by s, ignoring case,
// surrounding space and '_' for '-'. A blank s is the zero policy, the
// default (drop-lowest-priority with a Priority function, reject-new
// without), so an empty configuration value keeps it. Anything else is a
// *ConfigError that lists the accepted names.
func ParseOverflowPolicy(s string) (OverflowPolicy, error) {
	v, ok := parseEnum(s, "", overflowPolicies...)
	if !ok {
		return "", unknownEnum("ConcurrencyLimiterOptions.Overflow", "overflow policy", s, overflowPolicies...)
	}
	return v, nil
}

var overflowPolicies = []OverflowPolicy{OverflowRejectNew, OverflowDropOldest, OverflowDropLowestPriority}

// ConcurrencyLimiterOptions configures a ConcurrencyLimiter. PermitLimit
// is required; the zero value of every other field means its default.
// Priority is called concurrently and must be safe for that.
type ConcurrencyLimiterOptions struct {
	// Name labels the strategy's events. Default "ConcurrencyLimiter".
	Name string
	// PermitLimit is the number of executions that may run at once.
	// Required, greater than 0. SetLimit changes it later.
	PermitLimit int
	// QueueLimit is how many executions may wait for a permit when all are
	// in use. 0 (the default) means no queue: reject at once.
	QueueLimit int
	// QueueTimeout is the longest an execution waits in the queue before it
	// is rejected with ReasonQueueTimeout. 0 means no queue timeout: wait
	// until a permit comes, the execution is evicted, or its context ends.
	// The wait never outlasts the context's deadline either way. Ignored
	// when QueueLimit is 0.
	QueueTimeout time.Duration
	// Priority ranks an execution that must queue: lower numbers are granted
	// sooner, and equal numbers in arrival order. It is called at most once
	// per execution with the execution's context, only when it has to queue
	// (never on the fast path, nor when reject-new sheds it), and outside the
	// limiter's lock, so it may be slow or panic without harming the limiter.
	// nil means every execution has priority 0.
	Priority func(ctx context.Context) int
	// Flow, when set, shares the permits fairly between the flows of one
	// priority (tenants, API keys, clients): it returns an execution's
	// flow key (by.Header and by.ClientIP (package core/inbound/by) are ready
	// made). A freed permit goes to the waiting flow that holds the fewest
	// permits per unit of FlowWeight, flows that hold equally many take
	// turns, and a flow's executions keep their arrival order; a full
	// queue sheds from the flow that uses the most, waiters and permits
	// together (see OverflowPolicy), and CoDel spares the flows whose
	// demand is met (see CoDelOptions).
	// It is called like Priority: at most once per execution, only when
	// the execution must queue or a full queue would shed it, outside the
	// lock. An execution admitted at once is not counted to its flow (when
	// permits are free nobody waits). A flow is kept only while it has an
	// execution queued or a permit from the queue, so memory is bounded by
	// the limits. A permit Acquire, AcquireN or Admit takes from the queue
	// is counted to its flow (all its permits, for a costly one) until its
	// ConcurrencyPermit is released. nil means one flow: arrival order within a
	// priority. Ignored when QueueLimit is 0.
	Flow func(ctx context.Context) string
	// FlowWeight gives flows unequal shares (paid tiers): a flow of
	// weight 4 may hold four times the permits of a flow of weight 1
	// before the other is served first. It is called with Flow; a flow
	// keeps the weight it had when it became active. Values below 1 count
	// as 1, above 1<<20 (1 048 576) as 1<<20. nil means 1. Requires
	// Flow.
	FlowWeight func(ctx context.Context) int
	// Cost, when set, says how many permits an execution takes: an
	// export or a large list may cost as much as many reads. Execute and
	// Admit call it once per execution, before the fast path, with the
	// execution's context; a caller that knows the cost uses AcquireN,
	// TryAcquireN or AdmitN instead (Acquire and TryAcquire take one). A cost below 1 counts as 1, and a
	// cost above the permit limit takes the whole limit (the execution
	// then runs alone). A costly waiter at the head of the queue holds
	// back the cheaper ones behind it until its permits are free, so it
	// is never starved (see AcquireN). With a Flow function, a flow is
	// charged every permit its executions hold. nil means 1 per
	// execution, at no cost to the fast path.
	Cost func(ctx context.Context) int
	// Overflow is what happens when the queue is full. Default
	// OverflowRejectNew, or OverflowDropLowestPriority when Priority is
	// set (so that a full queue of less important waiters cannot turn a
	// more important newcomer away).
	Overflow OverflowPolicy
	// CoDel, when set, turns on the CoDel discipline so that sustained
	// overload cannot build a standing queue (see CoDelOptions). nil (the
	// default) keeps the plain queue. Ignored when QueueLimit is 0.
	CoDel *CoDelOptions
}

// ConcurrencyLimiter caps the number of executions running at
// once and queues a bounded number of others, ordered by priority and then
// arrival. It is a Strategy, and can also be used directly through Acquire
// and Release.
//
// A released permit is handed straight to the best waiter, so a newcomer
// never overtakes the queue. A waiter whose context ends as it is granted
// passes the permit on and returns the context's error; one whose queue
// timeout fires as it is granted runs. Memory is bounded by QueueLimit,
// and the fast path (a free permit and nobody waiting) allocates nothing.
//
// Safe for concurrent use; pipelines that share one share its permits.
// Create it with NewConcurrencyLimiter; the zero value rejects every
// execution with ReasonFull. A rejection, cancellation or panic returns
// the permit and queue place. It must not be copied after first use.
type ConcurrencyLimiter struct {
	// Each queued waiter leaves the queue exactly once, under the
	// limiter's mutex, as granted, evicted, cancelled or timed out, so a
	// cancellation, queue timeout or eviction racing a grant never loses or
	// duplicates a permit (the queue engine's waiter states).
	name   string
	opts   ConcurrencyLimiterOptions // as given, for validate
	engine queue.Engine
	fair   *ranker // nil without a Flow function
}

// Rejections are shared values: they carry nothing per execution, and
// sharing keeps the rejection path, the one that runs hottest under
// overload, free of allocation.
var (
	errLimitFull         = &ConcurrencyLimitRejectedError{Reason: ReasonFull}
	errLimitQueueTimeout = &ConcurrencyLimitRejectedError{Reason: ReasonQueueTimeout}
	errLimitDropped      = &ConcurrencyLimitRejectedError{Reason: ReasonDropped}
	errLimitShuttingDown = &ConcurrencyLimitRejectedError{Reason: ReasonShuttingDown}
)

// NewConcurrencyLimiter returns a limiter configured by opts, or a
// *ConfigError naming the first invalid field.
func NewConcurrencyLimiter(opts ConcurrencyLimiterOptions) (*ConcurrencyLimiter, error) {
	if err := validateConcurrencyOptions(opts); err != nil {
		return nil, err
	}
	l := &ConcurrencyLimiter{name: opts.Name, opts: opts}
	if l.name == "" {
		l.name = "ConcurrencyLimiter"
	}
	eo := engineOptions(opts.PermitLimit, opts.QueueLimit, opts.QueueTimeout, opts.Priority, opts.Overflow, opts.CoDel)
	if opts.Flow != nil && opts.QueueLimit > 0 {
		eo.Fair = true
		l.fair = &ranker{priority: opts.Priority, flow: opts.Flow, weight: opts.FlowWeight}
	}
	l.engine.Init(eo)
	return l, nil
}

// engineOptions translates validated options for the queue engine,
// applying the defaults.
func engineOptions(limit, queueLimit int, queueTimeout time.Duration, priority func(context.Context) int,
	overflow OverflowPolicy, codel *CoDelOptions) queue.Options {
	if overflow == "" && priority != nil {
		// Reject-new would turn a more important newcomer away from a
		// queue full of less important waiters, so priorities would decide
		// nothing under sustained overload. Among equal priorities
		// drop-lowest-priority rejects the newcomer, exactly like
		// reject-new.
		overflow = OverflowDropLowestPriority
	}
	o := queue.Options{Limit: limit, QueueLimit: queueLimit, QueueTimeout: queueTimeout}
	switch p, _ := ParseOverflowPolicy(string(overflow)); p { // validated: never fails
	case OverflowDropOldest:
		o.Overflow = queue.DropOldest
	case OverflowDropLowestPriority:
		o.Overflow = queue.DropLowestPriority
	}
	if codel != nil {
		o.CoDel = &queue.CoDel{Interval: codel.Interval, Target: codel.Target, AdaptiveLIFO: codel.AdaptiveLIFO}
	}
	return o
}

// engineError returns the error of an engine's Acquire that did not admit:
// a shared *ConcurrencyLimitRejectedError, or context.Cause(ctx) for a context
// that ended first.
func engineError(ctx context.Context, r queue.Result) error {
	switch r {
	case queue.Admitted:
		return nil
	case queue.Full:
		return errLimitFull
	case queue.QueueTimeout:
		return errLimitQueueTimeout
	case queue.Dropped:
		return errLimitDropped
	case queue.ShuttingDown:
		return errLimitShuttingDown
	}
	return context.Cause(ctx)
}

// AddConcurrencyLimiter appends a new concurrency limiter configured by
// opts. To read its statistics or change its limit, build it with
// NewConcurrencyLimiter and add it with AddStrategy instead.
func (b *Builder[T]) AddConcurrencyLimiter(opts ConcurrencyLimiterOptions) *Builder[T] {
	l, err := NewConcurrencyLimiter(opts)
	if err != nil {
		return b.addBuilt(nil, err)
	}
	return b.addBuilt(l, nil)
}

func validateConcurrencyOptions(o ConcurrencyLimiterOptions) error {
	if err := checkPositiveInt("ConcurrencyLimiterOptions.PermitLimit", o.PermitLimit); err != nil {
		return err
	}
	if err := checkNonNegativeInt("ConcurrencyLimiterOptions.QueueLimit", o.QueueLimit); err != nil {
		return err
	}
	if err := checkNonNegativeDuration("ConcurrencyLimiterOptions.QueueTimeout", o.QueueTimeout); err != nil {
		return err
	}
	if _, err := ParseOverflowPolicy(string(o.Overflow)); err != nil {
		return err
	}
	if err := validateFlow("ConcurrencyLimiterOptions", o.Flow, o.FlowWeight); err != nil {
		return err
	}
	return validateCoDel("ConcurrencyLimiterOptions", o.CoDel)
}

// validate reports invalid options as a *ConfigError. A limiter made by
// NewConcurrencyLimiter is always valid; the zero value is not.
func (l *ConcurrencyLimiter) validate() error { return validateConcurrencyOptions(l.opts) }

// strategyName is the name used in telemetry (see StrategyName).
func (l *ConcurrencyLimiter) strategyName() string {
	if l.name == "" {
		return "ConcurrencyLimiter"
	}
	return l.name
}

// LimiterStats is a snapshot of a concurrency limiter's (fixed or
// adaptive) state, for health checks, dashboards and metrics; the JSON
// names are stable.
type LimiterStats struct {
	// Limit is the current permit limit.
	Limit int `json:"limit"`
	// InFlight is the number of permits held: an execution that costs n
	// (ConcurrencyLimiterOptions.Cost) holds n. It can exceed Limit for a
	// while after the limit is lowered, as running work is not interrupted.
	InFlight int `json:"inflight"`
	// Queued is the number of executions waiting for a permit.
	Queued int `json:"queued"`
	// Flows is the number of flows active (with an execution queued or a
	// permit from the queue), with a Flow function; 0 without one.
	Flows int `json:"flows,omitempty"`
	// LargestFlowShare is the share of the permits in flight held by the
	// flow that holds the most, from 0 to 1, with a Flow function; 0
	// without one. Flows themselves never appear in statistics or
	// telemetry: their number is the clients'.
	LargestFlowShare float64 `json:"largestFlowShare,omitempty"`
}

// Stats returns a consistent snapshot of the limit, the permits held and the
// waiters queued.
func (l *ConcurrencyLimiter) Stats() LimiterStats { return engineStats(&l.engine) }

func engineStats(e *queue.Engine) LimiterStats {
	limit, inFlight, queued := e.Stats()
	s := LimiterStats{Limit: limit, InFlight: inFlight, Queued: queued}
	s.Flows, s.LargestFlowShare = e.FlowStats()
	return s
}

// SetLimit changes the permit limit while the limiter is in use; n < 1 is
// treated as 1. Raising it grants queued waiters at once. Lowering it never
// interrupts running work: new executions are admitted again once fewer
// than n are in flight.
func (l *ConcurrencyLimiter) SetLimit(n int) {
	if n < 1 {
		n = 1
	}
	l.engine.Lock()
	l.engine.SetLimitLocked(n)
	l.engine.Unlock()
}

// Close stops admission for good, for a graceful shutdown: every queued
// execution is rejected at once, and every later Acquire, TryAcquire or
// Execute, with ReasonShuttingDown. Running executions keep their permits
// and release them as usual; Stats shows them finishing. Closing twice
// is harmless.
func (l *ConcurrencyLimiter) Close() { l.engine.Close() }

// Release returns a permit counted to no flow. If an execution is queued
// and the limit allows, the permit passes directly to the best waiter.
// Calling Release without holding a permit is a bug in the caller and
// panics, since silently ignoring it would break the limit.
//
// Deprecated: release the ConcurrencyPermit that TryAcquire, Acquire or
// Admit returned, which also returns its flow's count.
func (l *ConcurrencyLimiter) Release() { l.release() }

func (l *ConcurrencyLimiter) release() {
	if !l.engine.Release() {
		panic("resilience: ConcurrencyLimiter.Release without a held permit")
	}
}

// Execute implements Strategy: it takes a permit, runs next, and returns the
// permit when next returns or panics. A rejection emits
// event.ConcurrencyLimiterRejected with the RejectReason as its Reason and, if the
// execution had queued, the time it waited as its Duration; a permit
// obtained after queueing emits event.QueueAdmitted with the wait. An evicted
// execution reports its own eviction (ReasonDropped), on its own goroutine
// and with its own context and labels, so a limiter shared by several
// pipelines attributes each rejection to the right one. A context that ended
// first returns context.Cause(ctx) and emits nothing, as that is the
// caller's doing.
func (l *ConcurrencyLimiter) Execute(ctx context.Context, tel Telemetry, next Next) error {
	if l.opts.Cost != nil {
		return l.executeCost(ctx, tel, next)
	}
	if l.fair != nil {
		return l.executeFair(ctx, tel, next)
	}
	var rank func(context.Context) int
	if p := l.opts.Priority; p != nil {
		rank = func(ctx context.Context) int { return callPriority(ctx, &tel, p) }
	}
	waited, r := l.engine.Acquire(ctx, rank)
	if err := engineError(ctx, r); err != nil {
		emitLimiterRejection(ctx, tel, waited, err)
		return err
	}
	defer l.release()
	emitQueueAdmitted(ctx, tel, waited)
	return next(ctx)
}

// executeFair is Execute with a Flow function: the permit is counted to
// the execution's flow until it returns.
func (l *ConcurrencyLimiter) executeFair(ctx context.Context, tel Telemetry, next Next) error {
	waited, r, f := l.engine.AcquireRanked(ctx, l.fair.rankFunc(&tel), true)
	if err := engineError(ctx, r); err != nil {
		emitLimiterRejection(ctx, tel, waited, err)
		return err
	}
	defer l.engine.ReleaseFlow(f)
	emitQueueAdmitted(ctx, tel, waited)
	return next(ctx)
}

// emitQueueAdmitted emits event.QueueAdmitted for an execution that queued
// (waited > 0) before its permit.
func emitQueueAdmitted(ctx context.Context, tel Telemetry, waited time.Duration) {
	if waited > 0 {
		tel.Emit(ctx, event.Event{Name: event.QueueAdmitted, Duration: waited})
	}
}

// emitLimiterRejection emits event.ConcurrencyLimiterRejected for the engine's own
// rejections. A context error is returned as is and emits nothing, even if
// its cause is a *ConcurrencyLimitRejectedError.
func emitLimiterRejection(ctx context.Context, tel Telemetry, waited time.Duration, err error) {
	if r, ok := err.(*ConcurrencyLimitRejectedError); ok && (r == errLimitFull || r == errLimitQueueTimeout || r == errLimitDropped || r == errLimitShuttingDown) {
		tel.Emit(ctx, event.Event{Name: event.ConcurrencyLimiterRejected, Reason: string(r.Reason), Duration: waited, Err: err})
	}
}

// callPriority runs the Priority function for one execution, reporting a
// panic of it on tel before it goes on to the execution's caller.
func callPriority(ctx context.Context, tel *Telemetry, priority func(context.Context) int) int {
	defer reportHookPanic(ctx, tel, event.HookPriority)
	return priority(ctx)
}

// executeCost is Execute with a Cost function: the execution takes and
// returns its cost in permits.
func (l *ConcurrencyLimiter) executeCost(ctx context.Context, tel Telemetry, next Next) error {
	h, err := l.acquireN(ctx, &tel, callHook(ctx, &tel, event.HookCost, l.opts.Cost))
	if err != nil {
		return err
	}
	defer l.engine.ReleaseN(h)
	return next(ctx)
}

// acquireN takes n permits, queueing as the options allow, with Admit's
// events on tel (none when tel is nil): AcquireN, AdmitN and executeCost.
func (l *ConcurrencyLimiter) acquireN(ctx context.Context, tel *Telemetry, n int) (queue.Held, error) {
	var (
		waited time.Duration
		r      queue.Result
		h      queue.Held
	)
	if l.fair != nil {
		waited, r, h = l.engine.AcquireN(ctx, l.fair.rankFunc(tel), true, n)
	} else {
		rank := l.opts.Priority
		if p := rank; p != nil && tel != nil {
			rank = func(ctx context.Context) int { return callPriority(ctx, tel, p) }
		}
		waited, r, h = l.engine.AcquirePriorityN(ctx, rank, n)
	}
	if err := engineError(ctx, r); err != nil {
		if tel != nil {
			emitLimiterRejection(ctx, *tel, waited, err)
		}
		return queue.Held{}, err
	}
	if tel != nil {
		emitQueueAdmitted(ctx, *tel, waited)
	}
	return h, nil
}
