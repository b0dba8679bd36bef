package resilience

import (
	"context"
	"time"

	"github.com/ylcnfrht/resilience/core/budget"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/property"
)

// HedgingOptions configures a Hedging. The zero value launches one hedged
// attempt at once, beside the first; set Delay to wait for the first
// attempt before hedging. Its functions are called concurrently and must
// be safe for that.
type HedgingOptions[T any] struct {
	// Name labels the strategy's events. Default "Hedging".
	Name string
	// MaxHedgedAttempts is the number of attempts that may be launched in
	// addition to the first, 1 to 10; 0 means 1.
	MaxHedgedAttempts int
	// Delay is how long to wait for an acceptable outcome before launching
	// the next attempt; 0 launches every attempt at once. A handled
	// (unacceptable) outcome launches the next attempt at once whatever the
	// delay.
	Delay time.Duration
	// ActionGenerator, when set, returns what hedged attempt n (1, 2, …)
	// runs, given next, the rest of the pipeline (for example next against
	// another replica, chosen through ctx). Returning nil launches no more
	// attempts. The default runs next for every attempt.
	ActionGenerator func(attempt int, next ResultNext[T]) ResultNext[T]
	// ShouldHandle says whether an outcome is unacceptable, so the race
	// goes on. The default handles any error except a context
	// cancellation.
	ShouldHandle func(o Outcome[T]) bool
	// OnHedging, when set, is called before hedged attempt n is launched.
	OnHedging func(ctx context.Context, attempt int)
	// OnDiscard, when set, is called exactly once for every outcome that
	// is not returned (the losers, handled outcomes superseded by a later
	// one or by the winner, and what attempts return while a panic
	// unwinds), after its attempt has returned, on the caller's goroutine.
	// It is where a discarded value is released (an HTTP response body
	// closed).
	OnDiscard func(o Outcome[T])
	// KeepWinner, when set, keeps the context of the attempt whose outcome
	// is returned alive after ExecuteResult returns, for values that stay
	// tied to it (a streaming HTTP response body). It is called once, on
	// the caller's goroutine, with that outcome and release, which cancels
	// the kept context (idempotent, safe from any goroutine); what it
	// returns is what ExecuteResult returns. It must arrange for release
	// to be called (when the body is closed or read to the end); until
	// then the context stays registered on the caller's. When nil (the
	// default), every attempt's context, the winner's included, is
	// cancelled before ExecuteResult returns.
	KeepWinner func(o Outcome[T], release func()) Outcome[T]
	// Budget, when set, caps hedged attempts across executions: each
	// execution records its first attempt in it, and a hedge it denies is
	// not launched (event.RetryBudgetExceeded); the attempts already
	// running race on. Share one budget with the retries that call the
	// same dependency.
	Budget *budget.Budget
}

const maxHedgedAttempts = 10

// Hedging races attempts against slowness: it starts the rest of
// the pipeline, and if no acceptable outcome has arrived after Delay
// starts it again in parallel, up to MaxHedgedAttempts more times. The
// first acceptable outcome wins, and the contexts of the other attempts
// are cancelled. If every outcome is handled, the last one to arrive is
// returned.
//
// No goroutine, timer or context outlives the execution: ExecuteResult
// waits for every attempt it launched to return (so attempts must watch
// their contexts), and each attempt runs with its own context derived from
// the caller's, all of them cancelled before ExecuteResult returns, the
// winner's included, so nothing stays registered on a long-lived caller's
// context. A value that must still be read through the winner's context
// after the return (an HTTP response body) needs KeepWinner. A panic in an
// attempt cancels the others and is re-raised on the caller's goroutine
// once they have returned; so is a panic in a hook called on the caller's
// goroutine (ShouldHandle, ActionGenerator, OnHedging, OnDiscard,
// KeepWinner), after the launched attempts have been cancelled and have
// returned (their outcomes discarded, a panic among them dropped in favour
// of the hook's). A context marked by property.WithSingleAttempt gets one
// attempt, run directly.
//
// Safe for concurrent use. Emits event.Hedging for each hedged launch,
// event.ExecutionAttempt for each attempt and event.RetryBudgetExceeded
// for a hedge its Budget denied. Create it with NewHedging or
// Builder.AddHedging.
type Hedging[T any] struct {
	opts   HedgingOptions[T]
	name   string
	max    int
	delay  time.Duration // 0: launch all at once
	handle func(Outcome[T]) bool
}

// NewHedging returns a hedging strategy, or a *ConfigError naming the
// first invalid option.
func NewHedging[T any](opts HedgingOptions[T]) (*Hedging[T], error) {
	s := newHedging(opts)
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// newHedging applies the defaults without validating; Build validates.
func newHedging[T any](opts HedgingOptions[T]) *Hedging[T] {
	s := &Hedging[T]{opts: opts, name: opts.Name, max: opts.MaxHedgedAttempts, delay: max(opts.Delay, 0), handle: opts.ShouldHandle}
	if s.name == "" {
		s.name = "Hedging"
	}
	s.max = min(max(s.max, 1), maxHedgedAttempts) // 0 is 1; invalid values used without Build stay bounded
	if s.handle == nil {
		s.handle = handlesFailure[T]
	}
	return s
}

// AddHedging appends a Hedging configured by opts; Build reports invalid
// options.
func (b *Builder[T]) AddHedging(opts HedgingOptions[T]) *Builder[T] {
	return b.AddResultStrategy(newHedging(opts))
}

// validate reports invalid options as a *ConfigError.
func (s *Hedging[T]) validate() error {
	o := s.opts
	if o.MaxHedgedAttempts < 0 || o.MaxHedgedAttempts > maxHedgedAttempts {
		return configErrorf("HedgingOptions.MaxHedgedAttempts", "must be 0 (default 1) or between 1 and %d, got %d",
			maxHedgedAttempts, o.MaxHedgedAttempts)
	}
	return checkNonNegativeDuration("HedgingOptions.Delay", o.Delay)
}

// strategyName is the name used in telemetry (see StrategyName).
func (s *Hedging[T]) strategyName() string { return s.name }

// hedgeResult is what one attempt reports back.
type hedgeResult[T any] struct {
	attempt  int
	v        T
	err      error
	took     time.Duration
	panicked bool
	panicVal any
}

// hedgeRun is the state of one hedged execution, owned by the goroutine
// that called ExecuteResult.
type hedgeRun[T any] struct {
	s       *Hedging[T]
	ctx     context.Context
	tel     Telemetry
	next    ResultNext[T]
	results chan hedgeResult[T]
	cancels []context.CancelFunc
	pending int
	stopped bool // no more launches: a winner, a panic, a nil action or a done context
}

// ExecuteResult implements ResultStrategy.
func (s *Hedging[T]) ExecuteResult(ctx context.Context, tel Telemetry, next ResultNext[T]) (T, error) {
	if b := s.opts.Budget; b != nil {
		b.FirstAttempt()
	}
	if property.SingleAttempt(ctx) {
		return next(ctx)
	}
	total := s.max + 1
	r := &hedgeRun[T]{
		s: s, ctx: ctx, tel: tel, next: next,
		// Buffered for every attempt, so an attempt never blocks on
		// reporting, whatever the main loop is doing.
		results: make(chan hedgeResult[T], total),
		cancels: make([]context.CancelFunc, 0, total),
	}
	var timer *time.Timer
	var won, last *hedgeResult[T] // last: the latest handled outcome
	var inHand *hedgeResult[T]    // received, not yet won, kept or discarded
	var panicked *hedgeResult[T]
	unwinding := true
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if unwinding {
			// A hook panicked on this goroutine. No attempt may outlive
			// the execution, and nothing that is not returned may leak.
			r.cancelExcept(-1)
			r.drain()
			for _, res := range []*hedgeResult[T]{inHand, won, last} {
				if res != nil && !res.panicked {
					r.discard(Outcome[T]{Value: res.v, Err: res.err})
				}
			}
		}
	}()
	r.launch()
	for r.pending > 0 {
		canLaunch := !r.stopped && len(r.cancels) < total
		if canLaunch && s.delay == 0 {
			r.launch()
			continue
		}
		var tick <-chan time.Time
		var done <-chan struct{}
		if canLaunch {
			if timer == nil {
				timer = time.NewTimer(s.delay)
			}
			tick, done = timer.C, ctx.Done()
		}
		select {
		case <-tick:
			r.launch()
			timer.Reset(s.delay)
		case <-done:
			r.stopped = true
		case res := <-r.results:
			r.pending--
			inHand = &res
			o := Outcome[T]{Value: res.v, Err: res.err}
			handled := res.panicked || s.handle(o)
			emitAttempt(ctx, tel, res.attempt, res.took, handled, res.err)
			switch {
			case res.panicked:
				inHand = nil
				if panicked == nil {
					panicked = &res
					r.stopped = true
					r.cancelExcept(-1)
				}
			case won != nil || panicked != nil:
				inHand = nil
				r.discard(o)
			case !handled:
				won, inHand = &res, nil
				r.stopped = true
				r.cancelExcept(res.attempt)
				if last != nil {
					// Superseded by the winner: it will not be returned.
					l := last
					last = nil
					r.discard(Outcome[T]{Value: l.v, Err: l.err})
				}
			default:
				if last != nil {
					l := last
					last = nil
					r.discard(Outcome[T]{Value: l.v, Err: l.err})
				}
				last, inHand = &res, nil
				// A failure needs no more waiting: the next attempt
				// starts now, and its delay runs from here.
				if !r.stopped && len(r.cancels) < total && ctx.Err() == nil {
					r.launch()
					if timer != nil {
						timer.Reset(s.delay)
					}
				}
			}
		}
	}
	if panicked != nil {
		for _, res := range []*hedgeResult[T]{won, last} {
			if res != nil {
				r.discard(Outcome[T]{Value: res.v, Err: res.err})
			}
		}
		unwinding = false
		r.cancelExcept(-1)
		panic(panicked.panicVal)
	}
	if won == nil {
		won = last
	}
	o, n := Outcome[T]{Value: won.v, Err: won.err}, won.attempt
	won, last = nil, nil // from here the outcome is the caller's (or KeepWinner's)
	if keep := s.opts.KeepWinner; keep != nil {
		r.cancelExcept(n)
		// A panic in KeepWinner cancels every context, the kept one too.
		o = keep(o, r.cancels[n])
		unwinding = false
		return o.Value, o.Err
	}
	unwinding = false
	r.cancelExcept(-1)
	return o.Value, o.Err
}

// launch starts the next attempt on its own goroutine.
func (r *hedgeRun[T]) launch() {
	n := len(r.cancels)
	action := r.next
	if n > 0 {
		if g := r.s.opts.ActionGenerator; g != nil {
			if action = g(n, r.next); action == nil {
				r.stopped = true
				return
			}
		}
		if b := r.s.opts.Budget; b != nil && !b.AllowRetry() {
			r.stopped = true
			r.tel.Emit(r.ctx, event.Event{Name: event.RetryBudgetExceeded, Attempt: n})
			return
		}
		if r.s.opts.OnHedging != nil {
			r.s.opts.OnHedging(r.ctx, n)
		}
		r.tel.Emit(r.ctx, event.Event{Name: event.Hedging, Attempt: n})
	}
	actx, cancel := context.WithCancel(r.ctx)
	r.cancels = append(r.cancels, cancel)
	r.pending++
	go func() {
		res := hedgeResult[T]{attempt: n}
		start := time.Now()
		completed := false
		defer func() {
			if !completed {
				// A panic (or runtime.Goexit) in the attempt: report it
				// instead of crashing the process from this goroutine.
				res.panicked = true
				res.panicVal = recover()
			}
			res.took = time.Since(start)
			r.results <- res
		}()
		res.v, res.err = action(actx)
		completed = true
	}()
}

// cancelExcept cancels the context of every attempt but keep (-1: all).
func (r *hedgeRun[T]) cancelExcept(keep int) {
	for i, c := range r.cancels {
		if i != keep {
			c()
		}
	}
}

// drain waits for every launched attempt still running to return and
// discards what it returns.
func (r *hedgeRun[T]) drain() {
	for ; r.pending > 0; r.pending-- {
		if res := <-r.results; !res.panicked {
			r.discard(Outcome[T]{Value: res.v, Err: res.err})
		}
	}
}

func (r *hedgeRun[T]) discard(o Outcome[T]) {
	if r.s.opts.OnDiscard != nil {
		r.s.opts.OnDiscard(o)
	}
}
