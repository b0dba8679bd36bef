package resilience

import (
	"context"
	"errors"
	"fmt"

	"github.com/ylcnfrht/resilience/core/event"
)

// Next runs the rest of a pipeline: the strategies inside the current one and
// finally the callback. A strategy may call it any number of times (a retry
// calls it again), but must not return before a call it made has returned.
// Calls must not overlap: concurrent calls would race on the callback's
// value, so a strategy that runs attempts in parallel must be a
// ResultStrategy. Each call runs the rest afresh, so a failed call leaves
// nothing behind for the next. The pipeline never passes a nil Next.
type Next func(ctx context.Context) error

// Strategy is one stage of a pipeline. Strategies are values: the same value
// can be added to several pipelines (a concurrency limiter shared by two
// pipelines shares its permits). Implementations must be safe for concurrent
// use.
//
// Execute runs next under the strategy and returns next's error, or its own
// rejection error without calling next. tel labels the strategy's events
// with the names of the pipeline that is executing and of this stage. It
// must give back what it took (a permit, a timer) before it returns, also
// when next fails or panics, so a failed execution leaves the strategy
// ready for the next one. A nil Strategy is refused by AddStrategy with a
// *ConfigError.
type Strategy interface {
	Execute(ctx context.Context, tel Telemetry, next Next) error
}

// Validator is implemented by strategies whose options can be invalid. Build
// calls Validate and fails, naming the field, instead of failing per request.
// Validate must only read, so it is safe to call concurrently with
// executions. A strategy that does not implement it is taken as valid.
type Validator interface {
	Validate() error
}

// validator is implemented by this package's strategies, whose options
// are checked by their constructors or, when a Builder shortcut made them,
// by Build.
type validator interface{ validate() error }

// validateStrategy checks s through Validator or validator, if it has
// either.
func validateStrategy(s any) error {
	switch v := s.(type) {
	case Validator:
		return v.Validate()
	case validator:
		return v.validate()
	}
	return nil
}

// ResultStrategy is a strategy that sees the callback's value, not only its
// error: a retry whose predicate looks at the result, a fallback that
// substitutes a value, hedging that keeps the first acceptable result. It is
// generic, so a value serves pipelines of one T. next may be called several
// times, also concurrently (hedging); each call returns its own value.
// Implementations must be safe for concurrent use and, like a Strategy,
// give back what they took before returning, also when next fails or
// panics. A nil ResultStrategy is refused by AddResultStrategy with a
// *ConfigError.
type ResultStrategy[T any] interface {
	ExecuteResult(ctx context.Context, tel Telemetry, next ResultNext[T]) (T, error)
}

// ResultNext runs the rest of a pipeline and returns the callback's value.
// It may be called several times, also concurrently: each call runs the
// rest afresh with its own value, so a failed call leaves nothing behind
// for the next. The pipeline never passes a nil ResultNext.
type ResultNext[T any] func(ctx context.Context) (T, error)

// Named is implemented by strategies of your own that have a name for
// telemetry (see StrategyName). Build reads the name once.
type Named interface {
	StrategyName() string
}

// named is implemented by this package's strategies: the name in their
// options, or their default.
type named interface{ strategyName() string }

// StrategyName returns the name a pipeline labels s's events with: the
// Name in a built-in strategy's options or its default ("Retry",
// "ConcurrencyLimiter", …), what a Named strategy returns, and "Strategy"
// for any other value or an empty name. Use it to build the Telemetry of a
// strategy run outside a pipeline.
func StrategyName(s any) string {
	var name string
	switch n := s.(type) {
	case named:
		name = n.strategyName()
	case Named:
		name = n.StrategyName()
	}
	if name == "" {
		return "Strategy"
	}
	return name
}

// ErrNilCallback is returned by Execute when the callback is nil.
var ErrNilCallback = errors.New("resilience: nil callback")

// Pipeline runs callbacks through a fixed chain of strategies, outermost
// first in the order they were added to the builder. A Pipeline is
// immutable once built and safe for concurrent use; stateful strategies in
// it (limiters) keep their own state. The zero value is an empty pipeline
// that calls the callback directly.
type Pipeline[T any] struct {
	name   string
	stages []stage[T]
}

// stage is one strategy of a pipeline: exactly one of plain and result is
// set.
type stage[T any] struct {
	plain  Strategy
	result ResultStrategy[T]
	tel    Telemetry
}

// Strategies returns the pipeline's strategies, outermost first, each the
// Strategy or ResultStrategy[T] value added to the builder: for code that
// must refuse a pipeline holding a kind of strategy (package outbound
// refuses a *Timeout) and for diagnostics. The slice is new on every call.
func (p *Pipeline[T]) Strategies() []any {
	out := make([]any, len(p.stages))
	for i, s := range p.stages {
		if s.plain != nil {
			out[i] = s.plain
		} else {
			out[i] = s.result
		}
	}
	return out
}

// Name returns the pipeline's name.
func (p *Pipeline[T]) Name() string { return p.name }

// Execute runs fn through the pipeline with a context derived from ctx, so
// fn stops when ctx (for example an HTTP request's) is cancelled or reaches
// its deadline. It returns fn's value and error, or the zero T and the
// rejection error of the strategy that refused to run fn. A panic in fn
// propagates to the caller after every strategy has released what it held.
func (p *Pipeline[T]) Execute(ctx context.Context, fn func(ctx context.Context) (T, error)) (T, error) {
	if fn == nil {
		var zero T
		return zero, ErrNilCallback
	}
	if p == nil {
		return fn(ctx)
	}
	return p.run(ctx, 0, fn)
}

// run executes stage i and, through it, the stages after it and fn.
func (p *Pipeline[T]) run(ctx context.Context, i int, fn func(context.Context) (T, error)) (T, error) {
	if i == len(p.stages) {
		return fn(ctx)
	}
	s := &p.stages[i]
	if s.result != nil {
		return s.result.ExecuteResult(ctx, s.tel, func(ctx context.Context) (T, error) {
			return p.run(ctx, i+1, fn)
		})
	}
	// A plain strategy passes only the error through; the value travels in
	// a variable of this call, so concurrent calls of next (hedging further
	// out) never share one.
	var v T
	err := s.plain.Execute(ctx, s.tel, func(ctx context.Context) error {
		var err error
		v, err = p.run(ctx, i+1, fn)
		return err
	})
	return v, err
}

// PipelineOption configures a Builder: WithName, WithListener. NewBuilder
// skips a nil one.
type PipelineOption func(*builderConfig)

type builderConfig struct {
	name     string
	listener event.Listener
}

// WithName sets the pipeline's name, used to label telemetry.
func WithName(name string) PipelineOption {
	return func(c *builderConfig) { c.name = name }
}

// WithListener sets the listener that receives every strategy's events.
func WithListener(l event.Listener) PipelineOption {
	return func(c *builderConfig) { c.listener = l }
}

// Builder assembles a Pipeline; most callers chain NewBuilder, Add* and
// Build. Strategies run outermost first in the order they are added.
// Invalid options accumulate and Build returns them all. A Builder is not
// safe for concurrent use; its zero value is NewBuilder without options.
type Builder[T any] struct {
	cfg    builderConfig
	stages []stage[T]
	errs   []error
}

// NewBuilder returns a builder for pipelines whose callbacks return T.
func NewBuilder[T any](opts ...PipelineOption) *Builder[T] {
	b := &Builder[T]{}
	for _, o := range opts {
		if o != nil {
			o(&b.cfg)
		}
	}
	return b
}

// AddStrategy appends s. Each strategy of this package has a shortcut
// taking its options (AddTimeout, AddConcurrencyLimiter, …); AddStrategy
// is how a custom strategy or a shared stateful one (a limiter whose
// statistics the caller reads) joins.
func (b *Builder[T]) AddStrategy(s Strategy) *Builder[T] {
	if s == nil {
		b.errs = append(b.errs, &ConfigError{Field: "Builder.AddStrategy", Problem: "strategy is nil"})
		return b
	}
	b.stages = append(b.stages, stage[T]{plain: s})
	return b
}

// AddResultStrategy appends a strategy that sees the callback's value.
func (b *Builder[T]) AddResultStrategy(s ResultStrategy[T]) *Builder[T] {
	if s == nil {
		b.errs = append(b.errs, &ConfigError{Field: "Builder.AddResultStrategy", Problem: "strategy is nil"})
		return b
	}
	b.stages = append(b.stages, stage[T]{result: s})
	return b
}

// addBuilt appends a strategy made by a constructor that may have failed.
func (b *Builder[T]) addBuilt(s Strategy, err error) *Builder[T] {
	if err != nil {
		b.errs = append(b.errs, err)
		return b
	}
	return b.AddStrategy(s)
}

// Build validates every strategy and returns the pipeline, or an error that
// joins one *ConfigError per invalid option.
func (b *Builder[T]) Build() (*Pipeline[T], error) {
	errs := append([]error(nil), b.errs...)
	p := &Pipeline[T]{name: b.cfg.name, stages: make([]stage[T], len(b.stages))}
	for i, st := range b.stages {
		var s any = st.plain
		if st.result != nil {
			s = st.result
		}
		if err := validateStrategy(s); err != nil {
			errs = append(errs, err)
		}
		st.tel = NewTelemetry(b.cfg.name, StrategyName(s), b.cfg.listener)
		p.stages[i] = st
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// String describes the pipeline for diagnostics.
func (p *Pipeline[T]) String() string {
	names := make([]string, len(p.stages))
	for i, s := range p.stages {
		names[i] = s.tel.strategy
	}
	return fmt.Sprintf("Pipeline(%q %v)", p.name, names)
}
