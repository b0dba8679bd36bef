package resilience

import (
	"context"
	"errors"
	"fmt"
)

// Next runs the rest of a pipeline: the strategies inside the current one and
// finally the callback. A strategy may call it any number of times (a retry
// calls it again), but must not return before a call it made has returned.
type Next func(ctx context.Context) error

// Strategy is one stage of a pipeline. Strategies are values: the same value
// can be added to several pipelines (a concurrency limiter shared by two
// pipelines shares its permits). Implementations must be safe for concurrent
// use.
//
// Execute runs next under the strategy and returns next's error, or its own
// rejection error without calling next. tel labels the strategy's events
// with the names of the pipeline that is executing and of this stage.
type Strategy interface {
	Execute(ctx context.Context, tel Telemetry, next Next) error
}

// Validator is implemented by strategies whose options can be invalid. Build
// calls Validate and fails, naming the field, instead of failing per request.
type Validator interface {
	Validate() error
}

// Named is implemented by strategies that have a name for telemetry. A
// strategy without one is labelled "Strategy".
type Named interface {
	StrategyName() string
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
	stages []stage
}

type stage struct {
	strategy Strategy
	tel      Telemetry
}

// Name returns the pipeline's name.
func (p *Pipeline[T]) Name() string { return p.name }

// Execute runs fn through the pipeline with a context derived from ctx, so
// fn stops when ctx (for example an HTTP request's) is cancelled or reaches
// its deadline. It returns fn's value and error, or the zero T and the
// rejection error of the strategy that refused to run fn. A panic in fn
// propagates to the caller after every strategy has released what it held.
func (p *Pipeline[T]) Execute(ctx context.Context, fn func(ctx context.Context) (T, error)) (T, error) {
	var result T
	if fn == nil {
		return result, ErrNilCallback
	}
	if p == nil || len(p.stages) == 0 {
		return fn(ctx)
	}
	err := p.run(ctx, 0, func(ctx context.Context) error {
		v, err := fn(ctx)
		result = v
		return err
	})
	return result, err
}

func (p *Pipeline[T]) run(ctx context.Context, i int, last Next) error {
	if i == len(p.stages)-1 {
		s := &p.stages[i]
		return s.strategy.Execute(ctx, s.tel, last)
	}
	s := &p.stages[i]
	return s.strategy.Execute(ctx, s.tel, func(ctx context.Context) error {
		return p.run(ctx, i+1, last)
	})
}

// PipelineOption configures a Builder.
type PipelineOption func(*builderConfig)

type builderConfig struct {
	name     string
	listener Listener
}

// Name sets the pipeline's name, used to label telemetry.
func Name(name string) PipelineOption {
	return func(c *builderConfig) { c.name = name }
}

// WithListener sets the listener that receives every strategy's events.
func WithListener(l Listener) PipelineOption {
	return func(c *builderConfig) { c.listener = l }
}

// Builder assembles a Pipeline. Strategies run outermost first in the order
// they are added. A Builder is not safe for concurrent use; its zero value is
// not usable (use NewBuilder). Errors from invalid options accumulate and are
// all returned by Build.
type Builder[T any] struct {
	cfg        builderConfig
	strategies []Strategy
	errs       []error
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

// AddStrategy appends s. Strategies from this package have shortcuts
// (AddTimeout, AddConcurrencyLimiter, …); this is how a custom strategy or
// a shared stateful one (a limiter whose statistics the caller reads) joins.
func (b *Builder[T]) AddStrategy(s Strategy) *Builder[T] {
	if s == nil {
		b.errs = append(b.errs, &ConfigError{Field: "Builder.AddStrategy", Problem: "strategy is nil"})
		return b
	}
	b.strategies = append(b.strategies, s)
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
	for _, s := range b.strategies {
		if v, ok := s.(Validator); ok {
			if err := v.Validate(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p := &Pipeline[T]{name: b.cfg.name, stages: make([]stage, len(b.strategies))}
	for i, s := range b.strategies {
		name := "Strategy"
		if n, ok := s.(Named); ok && n.StrategyName() != "" {
			name = n.StrategyName()
		}
		p.stages[i] = stage{strategy: s, tel: NewTelemetry(b.cfg.name, name, b.cfg.listener)}
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
