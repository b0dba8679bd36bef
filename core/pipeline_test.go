package resilience

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
)

// recordingStrategy appends its name to a shared log before and after next,
// so tests can see the composition order.
type recordingStrategy struct {
	name string
	log  *[]string
}

func (s recordingStrategy) Execute(ctx context.Context, tel Telemetry, next Next) error {
	*s.log = append(*s.log, s.name+">")
	err := next(ctx)
	*s.log = append(*s.log, "<"+s.name)
	return err
}

func (s recordingStrategy) StrategyName() string { return s.name }

// Invariant: strategies run outermost first, in the order they were added.
func TestPipelineRunsStrategiesOutermostFirst(t *testing.T) {
	var log []string
	p, err := NewBuilder[int]().
		AddStrategy(recordingStrategy{"a", &log}).
		AddStrategy(recordingStrategy{"b", &log}).
		AddStrategy(recordingStrategy{"c", &log}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	v, err := p.Execute(context.Background(), func(context.Context) (int, error) {
		log = append(log, "fn")
		return 42, nil
	})
	if err != nil || v != 42 {
		t.Fatalf("Execute = %d, %v; want 42, nil", v, err)
	}
	want := "a> b> c> fn <c <b <a"
	if got := strings.Join(log, " "); got != want {
		t.Fatalf("order = %q, want %q", got, want)
	}
}

func TestPipelineReturnsCallbackError(t *testing.T) {
	boom := errors.New("boom")
	var log []string
	p, _ := NewBuilder[string]().AddStrategy(recordingStrategy{"a", &log}).Build()
	v, err := p.Execute(context.Background(), func(context.Context) (string, error) { return "partial", boom })
	if !errors.Is(err, boom) || v != "partial" {
		t.Fatalf("Execute = %q, %v", v, err)
	}
}

func TestEmptyAndZeroPipelinesCallTheCallback(t *testing.T) {
	p, err := NewBuilder[int]().Build()
	if err != nil {
		t.Fatal(err)
	}
	var zero Pipeline[int]
	for _, p := range []*Pipeline[int]{p, &zero, nil} {
		v, err := p.Execute(context.Background(), func(context.Context) (int, error) { return 7, nil })
		if v != 7 || err != nil {
			t.Fatalf("Execute = %d, %v", v, err)
		}
	}
}

// Invariant: a nil callback is an error, never a panic per request.
func TestPipelineNilCallback(t *testing.T) {
	p, _ := NewBuilder[int]().AddTimeout(TimeoutOptions{Timeout: 1}).Build()
	if _, err := p.Execute(context.Background(), nil); !errors.Is(err, ErrNilCallback) {
		t.Fatalf("err = %v", err)
	}
}

// Invariant: bad configuration fails at Build with every field named.
func TestBuildJoinsConfigErrors(t *testing.T) {
	_, err := NewBuilder[int]().
		AddStrategy(nil).
		AddTimeout(TimeoutOptions{Timeout: -1}).
		Build()
	if err == nil {
		t.Fatal("Build accepted invalid options")
	}
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("err %v does not match ErrInvalidOptions", err)
	}
	for _, field := range []string{"Builder.AddStrategy", "TimeoutOptions.Timeout"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("errors.As(*ConfigError) failed for %v", err)
	}
}

func TestStrategyNamesLabelTelemetry(t *testing.T) {
	var got []event.Event
	l := event.ListenerFunc(func(_ context.Context, e event.Event) { got = append(got, e) })
	emit := strategyFunc(func(ctx context.Context, tel Telemetry, next Next) error {
		tel.Emit(ctx, event.Event{Name: "Custom"})
		return next(ctx)
	})
	p, err := NewBuilder[int](WithName("orders"), WithListener(l)).AddStrategy(emit).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Execute(context.Background(), func(context.Context) (int, error) { return 0, nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Pipeline != "orders" || got[0].Strategy != "Strategy" || got[0].Name != "Custom" {
		t.Fatalf("events = %+v", got)
	}
	if s := p.String(); !strings.Contains(s, "orders") {
		t.Fatalf("String() = %q", s)
	}
}

type strategyFunc func(ctx context.Context, tel Telemetry, next Next) error

func (f strategyFunc) Execute(ctx context.Context, tel Telemetry, next Next) error {
	return f(ctx, tel, next)
}

func BenchmarkPipelineExecuteEmpty(b *testing.B) {
	p, _ := NewBuilder[int]().Build()
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	for b.Loop() {
		_, _ = p.Execute(ctx, fn)
	}
}

func BenchmarkPipelineExecuteTimeout(b *testing.B) {
	p, _ := NewBuilder[int]().AddTimeout(TimeoutOptions{Timeout: 1e9}).Build()
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	for b.Loop() {
		_, _ = p.Execute(ctx, fn)
	}
}

// resultFunc adapts a function to ResultStrategy.
type resultFunc[T any] func(ctx context.Context, tel Telemetry, next ResultNext[T]) (T, error)

func (f resultFunc[T]) ExecuteResult(ctx context.Context, tel Telemetry, next ResultNext[T]) (T, error) {
	return f(ctx, tel, next)
}

// A result strategy sees and may replace the callback's value, and composes
// with plain strategies in order.
func TestResultStrategySeesAndReplacesValue(t *testing.T) {
	var log []string
	double := resultFunc[int](func(ctx context.Context, _ Telemetry, next ResultNext[int]) (int, error) {
		v, err := next(ctx)
		return v * 2, err
	})
	p, err := NewBuilder[int]().
		AddStrategy(recordingStrategy{"outer", &log}).
		AddResultStrategy(double).
		AddStrategy(recordingStrategy{"inner", &log}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	v, err := p.Execute(context.Background(), func(context.Context) (int, error) { return 21, nil })
	if v != 42 || err != nil {
		t.Fatalf("Execute = %d, %v; want 42", v, err)
	}
	if got := strings.Join(log, " "); got != "outer> inner> <inner <outer" {
		t.Fatalf("order = %q", got)
	}
	if _, err := NewBuilder[int]().AddResultStrategy(nil).Build(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("nil result strategy: err = %v", err)
	}
}

// Invariant: concurrent calls of next from a result strategy (hedging) each
// get their own value through plain strategies further in; none is shared.
func TestResultStrategyConcurrentNextKeepsValuesApart(t *testing.T) {
	var log []string
	var mu sync.Mutex
	plain := strategyFunc(func(ctx context.Context, _ Telemetry, next Next) error {
		mu.Lock()
		log = append(log, "x")
		mu.Unlock()
		return next(ctx)
	})
	fanout := resultFunc[int](func(ctx context.Context, _ Telemetry, next ResultNext[int]) (int, error) {
		var wg sync.WaitGroup
		results := make([]int, 8)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], _ = next(context.WithValue(ctx, attemptKey{}, i))
			}()
		}
		wg.Wait()
		for i, r := range results {
			if r != i {
				return 0, fmt.Errorf("attempt %d got %d", i, r)
			}
		}
		return len(results), nil
	})
	p, _ := NewBuilder[int]().AddResultStrategy(fanout).AddStrategy(plain).Build()
	v, err := p.Execute(context.Background(), func(ctx context.Context) (int, error) {
		return ctx.Value(attemptKey{}).(int), nil
	})
	if v != 8 || err != nil {
		t.Fatalf("Execute = %d, %v", v, err)
	}
}

type attemptKey struct{}

// Strategies lists the pipeline's own strategy values, outermost first,
// plain and result strategies alike, in a slice the caller may keep.
func TestPipelineStrategies(t *testing.T) {
	to, err := NewTimeout(TimeoutOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fb := NewFallback(FallbackOptions[int]{FallbackValue: 1})
	p, err := NewBuilder[int]().AddStrategy(to).AddResultStrategy(fb).Build()
	if err != nil {
		t.Fatal(err)
	}
	got := p.Strategies()
	if len(got) != 2 || got[0] != any(to) || got[1] != any(fb) {
		t.Fatalf("Strategies() = %v, want [timeout fallback]", got)
	}
	got[0] = nil
	if p.Strategies()[0] != any(to) {
		t.Fatal("changing the returned slice changed the pipeline")
	}
	var zero Pipeline[int]
	if len(zero.Strategies()) != 0 {
		t.Fatal("the zero pipeline has strategies")
	}
}

type namedStrategy string

func (n namedStrategy) StrategyName() string { return string(n) }

// StrategyName is the label a pipeline gives a stage: a built-in
// strategy's configured name or default, a Named strategy's name, and
// "Strategy" otherwise.
func TestStrategyNameLabels(t *testing.T) {
	to, err := NewTimeout(TimeoutOptions{Name: "db-timeout", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    any
		want string
	}{
		{to, "db-timeout"},
		{&ConcurrencyLimiter{}, "ConcurrencyLimiter"},
		{&AdaptiveLimiter{}, "AdaptiveLimiter"},
		{namedStrategy("mine"), "mine"},
		{namedStrategy(""), "Strategy"},
		{42, "Strategy"},
		{nil, "Strategy"},
	} {
		if got := StrategyName(c.s); got != c.want {
			t.Errorf("StrategyName(%T) = %q, want %q", c.s, got, c.want)
		}
	}
}
