package resilience

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/property"
)

var errDependency = errors.New("dependency failed")

func buildResult[T any](t *testing.T, l event.Listener, s ResultStrategy[T]) *Pipeline[T] {
	t.Helper()
	p, err := NewBuilder[T](WithName("p"), WithListener(l)).AddResultStrategy(s).Build()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// recorder collects events; tests are single-goroutine or synchronised by
// synctest, but hedging emits from the caller only, so no lock is needed
// beyond what the tests use.
type recorder struct{ events []event.Event }

func (r *recorder) OnEvent(_ context.Context, e event.Event) { r.events = append(r.events, e) }

func (r *recorder) named(n event.Name) []event.Event {
	var out []event.Event
	for _, e := range r.events {
		if e.Name == n {
			out = append(out, e)
		}
	}
	return out
}

// failingAt returns a callback that records the fake time of each call and
// fails the first n calls.
func failingAt(n int, calls *[]time.Duration, start time.Time) func(context.Context) (int, error) {
	return func(context.Context) (int, error) {
		*calls = append(*calls, time.Since(start))
		if len(*calls) <= n {
			return 0, errDependency
		}
		return len(*calls), nil
	}
}

// Invariant: the zero options retry nothing: one call, its outcome
// returned at once, no event but the attempt's.
func TestRetryZeroOptionsRetryNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		p := buildResult[int](t, rec, newRetry(RetryOptions[int]{}))
		var calls []time.Duration
		_, err := p.Execute(context.Background(), failingAt(100, &calls, time.Now()))
		if !errors.Is(err, errDependency) || len(calls) != 1 || len(rec.named(event.Retry)) != 0 {
			t.Fatalf("err %v, calls %v, %d retry events", err, calls, len(rec.named(event.Retry)))
		}
	})
}

// Invariant: MaxRetryAttempts retries after the first call, Delay apart,
// and then the last outcome.
func TestRetryThreeRetriesTwoSecondsApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		p := buildResult[int](t, rec, newRetry(RetryOptions[int]{MaxRetryAttempts: 3, Delay: 2 * time.Second}))
		var calls []time.Duration
		start := time.Now()
		_, err := p.Execute(context.Background(), failingAt(100, &calls, start))
		if !errors.Is(err, errDependency) {
			t.Fatalf("err = %v", err)
		}
		want := []time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second}
		if fmt.Sprint(calls) != fmt.Sprint(want) {
			t.Fatalf("calls at %v, want %v", calls, want)
		}
		retries := rec.named(event.Retry)
		if len(retries) != 3 {
			t.Fatalf("%d OnRetry events, want 3", len(retries))
		}
		for i, e := range retries {
			if e.Attempt != i || e.Duration != 2*time.Second || e.Strategy != "Retry" || e.Pipeline != "p" || e.Err != errDependency {
				t.Errorf("OnRetry %d = %+v", i, e)
			}
		}
		attempts := rec.named(event.ExecutionAttempt)
		if len(attempts) != 4 || attempts[3].Reason != event.ReasonHandled || attempts[3].Attempt != 3 {
			t.Fatalf("attempt events = %+v", attempts)
		}
	})
}

// Invariant: each backoff type waits the documented delays, measured on
// the fake clock.
func TestRetryBackoffDelays(t *testing.T) {
	cases := []struct {
		backoff BackoffType
		want    []time.Duration // call times
	}{
		{BackoffConstant, []time.Duration{0, 100, 200, 300, 400}},
		{BackoffLinear, []time.Duration{0, 100, 300, 600, 1000}},
		{BackoffExponential, []time.Duration{0, 100, 300, 700, 1500}},
	}
	for _, c := range cases {
		t.Run(string(c.backoff), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := buildResult[int](t, nil, newRetry(RetryOptions[int]{MaxRetryAttempts: 4, Delay: 100 * time.Millisecond, BackoffType: c.backoff}))
				var calls []time.Duration
				_, err := p.Execute(context.Background(), failingAt(100, &calls, time.Now()))
				if err == nil {
					t.Fatal("want the last error")
				}
				for i := range c.want {
					c.want[i] *= time.Millisecond
				}
				if fmt.Sprint(calls) != fmt.Sprint(c.want) {
					t.Fatalf("calls at %v, want %v", calls, c.want)
				}
			})
		})
	}
}

// Invariant: MaxDelay caps growing delays, and a success stops retrying.
func TestRetryMaxDelayCapsAndSuccessStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := buildResult[int](t, nil, newRetry(RetryOptions[int]{MaxRetryAttempts: 10, Delay: time.Second,
			BackoffType: BackoffExponential, MaxDelay: 3 * time.Second}))
		var calls []time.Duration
		v, err := p.Execute(context.Background(), failingAt(4, &calls, time.Now()))
		if err != nil || v != 5 {
			t.Fatalf("got %d, %v", v, err)
		}
		want := []time.Duration{0, time.Second, 3 * time.Second, 6 * time.Second, 9 * time.Second}
		if fmt.Sprint(calls) != fmt.Sprint(want) {
			t.Fatalf("calls at %v, want %v", calls, want)
		}
	})
}

// Invariant: jitter stays within ±25 % for constant and linear backoff,
// and decorrelated jitter for exponential backoff is positive, grows, and
// for the same random draws is reproducible.
func TestRetryJitterBounds(t *testing.T) {
	for _, bt := range []BackoffType{BackoffConstant, BackoffLinear} {
		s := newRetry(RetryOptions[int]{Delay: time.Second, BackoffType: bt, UseJitter: true})
		for _, r := range []float64{0, 0.25, 0.5, 0.999} {
			s.random = func() float64 { return r }
			var st float64
			for attempt := range 4 {
				base := time.Second
				if bt == BackoffLinear {
					base *= time.Duration(attempt + 1)
				}
				d := s.backoffDelay(attempt, &st)
				lo, hi := base*3/4, base*5/4
				if d < lo || d >= hi {
					t.Errorf("%s r=%v attempt %d: %v outside [%v, %v)", bt, r, attempt, d, lo, hi)
				}
			}
		}
	}
	s := newRetry(RetryOptions[int]{Delay: time.Second, BackoffType: BackoffExponential, UseJitter: true})
	s.random = func() float64 { return 0.5 }
	var st float64
	var sum time.Duration
	for attempt := range 8 {
		d := s.backoffDelay(attempt, &st)
		if d <= 0 {
			t.Fatalf("attempt %d: delay %v", attempt, d)
		}
		sum += d
	}
	// The running sum tracks the curve 2^t·tanh(√4t)/1.4 at t = 7.5.
	if sum < 100*time.Second || sum > 150*time.Second {
		t.Fatalf("sum of 8 jittered delays = %v, want about 129s", sum)
	}
	// Far-off attempts (RetryForever) saturate instead of overflowing.
	if d := s.backoffDelay(5000, &st); d != maxDuration {
		t.Fatalf("attempt 5000: %v", d)
	}
	s2 := newRetry(RetryOptions[int]{Delay: time.Second, BackoffType: BackoffExponential})
	if d := s2.backoffDelay(5000, new(float64)); d != maxDuration {
		t.Fatalf("unjittered attempt 5000: %v", d)
	}
}

// Invariant: a delay is abandoned the moment the caller's context is done;
// no further attempt runs and the context's error is returned.
func TestRetryAbandonsDelayWhenContextDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := buildResult[int](t, nil, newRetry(RetryOptions[int]{MaxRetryAttempts: 3, Delay: 2 * time.Second}))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(500*time.Millisecond, cancel)
		var calls []time.Duration
		start := time.Now()
		_, err := p.Execute(ctx, failingAt(100, &calls, start))
		if !errors.Is(err, context.Canceled) || time.Since(start) != 500*time.Millisecond || len(calls) != 1 {
			t.Fatalf("err %v after %v with %d calls", err, time.Since(start), len(calls))
		}
	})
}

// Invariant: a delay that cannot end before the caller's deadline is not
// started; the last outcome is returned at once.
func TestRetryDoesNotWaitPastTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := buildResult[int](t, nil, newRetry(RetryOptions[int]{MaxRetryAttempts: 3, Delay: time.Second}))
		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		defer cancel()
		var calls []time.Duration
		start := time.Now()
		_, err := p.Execute(ctx, failingAt(100, &calls, start))
		if err != errDependency || time.Since(start) != 2*time.Second || len(calls) != 3 {
			t.Fatalf("err %v after %v with calls %v", err, time.Since(start), calls)
		}
	})
}

// Invariant: RetryForever retries until the context ends.
func TestRetryForeverStopsAtTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := buildResult[int](t, nil, newRetry(RetryOptions[int]{MaxRetryAttempts: RetryForever}))
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		_, err := p.Execute(ctx, func(context.Context) (int, error) {
			if n++; n == 1000 {
				cancel()
			}
			return 0, errDependency
		})
		if n != 1000 || err != errDependency {
			t.Fatalf("%d calls, err %v", n, err)
		}
	})
}

// Invariant: ShouldHandle sees values, so a value can be retried; the
// default does not retry the caller's cancellation.
func TestRetryShouldHandle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := buildResult[int](t, nil, newRetry(RetryOptions[int]{MaxRetryAttempts: 3, ShouldHandle: func(o Outcome[int]) bool { return o.Value < 3 }}))
		n := 0
		v, err := p.Execute(context.Background(), func(context.Context) (int, error) { n++; return n, nil })
		if v != 3 || err != nil {
			t.Fatalf("got %d, %v", v, err)
		}
		p = buildResult[int](t, nil, newRetry(RetryOptions[int]{}))
		n = 0
		_, err = p.Execute(context.Background(), func(context.Context) (int, error) {
			n++
			return 0, fmt.Errorf("call: %w", context.Canceled)
		})
		if n != 1 || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancellation retried: %d calls", n)
		}
	})
}

// Invariant: WithSingleAttempt suppresses retries and nothing else.
func TestRetrySingleAttempt(t *testing.T) {
	p := buildResult[int](t, nil, newRetry(RetryOptions[int]{}))
	n := 0
	_, err := p.Execute(property.WithSingleAttempt(context.Background()), func(context.Context) (int, error) { n++; return 0, errDependency })
	if n != 1 || err != errDependency {
		t.Fatalf("%d calls, %v", n, err)
	}
	if property.SingleAttempt(context.Background()) {
		t.Fatal("plain context is single-attempt")
	}
}

// Invariant: invalid options are a *ConfigError naming RetryOptions.Field,
// reported by Build, never a panic.
func TestRetryValidation(t *testing.T) {
	cases := []struct {
		opts  RetryOptions[int]
		field string
	}{
		{RetryOptions[int]{MaxRetryAttempts: -2}, "RetryOptions.MaxRetryAttempts"},
		{RetryOptions[int]{Delay: -2}, "RetryOptions.Delay"},
		{RetryOptions[int]{MaxDelay: -time.Second}, "RetryOptions.MaxDelay"},
		{RetryOptions[int]{BackoffType: "fibonacci"}, "RetryOptions.BackoffType"},
		{RetryOptions[int]{Delay: 200 * 365 * 24 * time.Hour}, "RetryOptions.Delay"},
	}
	for _, c := range cases {
		_, err := NewBuilder[int]().AddRetry(c.opts).Build()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%+v: err = %v, want field %s", c.opts, err, c.field)
		}
		if _, err := NewRetry(c.opts); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("NewRetry(%+v) = %v", c.opts, err)
		}
	}
	for _, ok := range []RetryOptions[int]{{}, {MaxRetryAttempts: RetryForever}, {BackoffType: BackoffLinear}} {
		if _, err := NewRetry(ok); err != nil {
			t.Errorf("NewRetry(%+v) = %v", ok, err)
		}
	}
}

func FuzzRetryOptionsValidate(f *testing.F) {
	f.Add(0, int64(0), int64(0), "")
	f.Add(-2, int64(-5), int64(-1), "linear")
	f.Add(RetryForever, int64(0), int64(time.Second), "exponential")
	f.Fuzz(func(t *testing.T, attempts int, delay, maxDelay int64, backoff string) {
		opts := RetryOptions[int]{MaxRetryAttempts: attempts, Delay: time.Duration(delay),
			MaxDelay: time.Duration(maxDelay), BackoffType: BackoffType(backoff), UseJitter: attempts%2 == 0}
		s, err := NewRetry(opts)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Field, "RetryOptions.") {
				t.Fatalf("err = %v", err)
			}
			return
		}
		var st float64
		for a := range 5 {
			if d := s.backoffDelay(a, &st); d < 0 || d > maxDuration {
				t.Fatalf("delay %v", d)
			}
		}
	})
}

// Invariant: the slog listener renders the outbound events, with the
// attempt number where it applies.
func TestSlogListenerRendersOutboundEvents(t *testing.T) {
	var buf strings.Builder
	l := event.NewSlogListener(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	p := buildResult[int](t, l, newRetry(RetryOptions[int]{MaxRetryAttempts: 1}))
	p.Execute(context.Background(), fail)
	out := buf.String()
	for _, want := range []string{"event=OnRetry", "attempt=0", "event=OnExecutionAttempt", "attempt=1", "reason=handled", "strategy=Retry", "level=DEBUG"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	NewTelemetry("p", "CircuitBreaker", l).Emit(context.Background(), event.Event{Name: event.CircuitOpened, Duration: 5 * time.Second})
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "event=OnCircuitOpened") || strings.Contains(out, "attempt=") {
		t.Errorf("circuit event: %s", out)
	}
}
