package resilience

import (
	"context"
	"errors"
	"testing"

	"github.com/ylcnfrht/resilience/core/event"
)

// Invariant: without a predicate the fallback answers every failure of the
// strategies inside it, a concurrency limiter's rejection included, with FallbackValue
// and a nil error; the callback never ran for the rejection.
func TestFallbackAnswersBulkheadRejection(t *testing.T) {
	cl, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{PermitLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer cl.Release()
	rec := &recorder{}
	var seen error
	p, err := NewBuilder[[]string](WithName("page"), WithListener(rec)).
		AddFallback(FallbackOptions[[]string]{
			FallbackValue: []string{},
			OnFallback:    func(_ context.Context, o Outcome[[]string]) { seen = o.Err },
		}).
		AddStrategy(cl).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	v, err := p.Execute(context.Background(), func(context.Context) ([]string, error) { ran = true; return []string{"x"}, nil })
	if err != nil || v == nil || len(v) != 0 || ran {
		t.Fatalf("got %v, %v (ran %v)", v, err, ran)
	}
	if !errors.Is(seen, ErrConcurrencyLimitRejected) {
		t.Fatalf("OnFallback saw %v", seen)
	}
	ev := rec.named(event.Fallback)
	if len(ev) != 1 || ev[0].Pipeline != "page" || ev[0].Strategy != "Fallback" || !errors.Is(ev[0].Err, ErrConcurrencyLimitRejected) {
		t.Fatalf("events %+v", ev)
	}
}

// Invariant: FallbackAction sees the failed outcome and its result is
// returned as is; unhandled outcomes and the caller's cancellation pass
// through untouched.
func TestFallbackActionAndPassThrough(t *testing.T) {
	p := buildResult[int](t, nil, NewFallback(FallbackOptions[int]{
		ShouldHandle: func(o Outcome[int]) bool { return o.Err != nil || o.Value < 0 },
		FallbackAction: func(_ context.Context, o Outcome[int]) (int, error) {
			if o.Err != nil {
				return 0, errors.New("substitute failed too")
			}
			return -o.Value, nil
		},
	}))
	if v, err := p.Execute(context.Background(), func(context.Context) (int, error) { return -4, nil }); v != 4 || err != nil {
		t.Fatalf("value fallback: %d, %v", v, err)
	}
	if _, err := p.Execute(context.Background(), fail); err == nil || err.Error() != "substitute failed too" {
		t.Fatalf("action error: %v", err)
	}
	if v, err := p.Execute(context.Background(), succeed); v != 1 || err != nil {
		t.Fatalf("success: %d, %v", v, err)
	}
	q := buildResult[int](t, nil, NewFallback(FallbackOptions[int]{FallbackValue: 7}))
	if _, err := q.Execute(context.Background(), func(context.Context) (int, error) { return 0, context.Canceled }); err != context.Canceled {
		t.Fatalf("cancellation answered: %v", err)
	}
	if v, err := q.Execute(context.Background(), fail); v != 7 || err != nil {
		t.Fatalf("FallbackValue: %d, %v", v, err)
	}
	if s := NewFallback(FallbackOptions[int]{Name: "f"}); StrategyName(s) != "f" {
		t.Fatal(StrategyName(s))
	}
}
