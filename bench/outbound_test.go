package bench

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
	resilience "github.com/ylcnfrht/resilience/core"
)

// The outbound benchmarks run a callback that succeeds at once, so they
// measure what each library adds to a call on the success path: the common
// case, paid on every call to a healthy dependency. Both compositions are
// retry (3 retries, 2 s) → circuit breaker (10 % of 100 in 30 s, 5 s
// break) → timeout (5 s), outermost first; failsafe.With also composes its
// first policy outermost.

func okCall(context.Context) (int, error) { return 1, nil }

func ourEmpty() (*resilience.Pipeline[int], error) {
	return resilience.NewBuilder[int]().Build()
}

func ourRetryBreakerTimeout() (*resilience.Pipeline[int], error) {
	return resilience.NewBuilder[int](resilience.WithName("dependency")).
		AddRetry(resilience.RetryOptions[int]{MaxRetryAttempts: 3, Delay: 2 * time.Second}).
		AddCircuitBreaker(resilience.CircuitBreakerOptions[int]{
			FailureRatio: 0.1, MinimumThroughput: 100, SamplingDuration: 30 * time.Second, BreakDuration: 5 * time.Second,
		}).
		AddTimeout(resilience.TimeoutOptions{Timeout: 5 * time.Second}).
		Build()
}

func failsafeRetryBreakerTimeout() failsafe.Executor[int] {
	rp := retrypolicy.NewBuilder[int]().WithMaxRetries(3).WithDelay(2 * time.Second).Build()
	cb := circuitbreaker.NewBuilder[int]().
		WithFailureRateThreshold(0.1, 100, 30*time.Second).
		WithDelay(5 * time.Second).
		Build()
	to := timeout.New[int](5 * time.Second)
	return failsafe.With[int](rp, cb, to)
}

func runOurs(b *testing.B, build func() (*resilience.Pipeline[int], error)) {
	p, err := build()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if v, err := p.Execute(ctx, okCall); v != 1 || err != nil {
			b.Fatal(v, err)
		}
	}
}

func runFailsafe(b *testing.B, ex failsafe.Executor[int]) {
	ctx := context.Background()
	ex = ex.WithContext(ctx)
	fn := func() (int, error) { return okCall(ctx) }
	b.ReportAllocs()
	for b.Loop() {
		if v, err := ex.Get(fn); v != 1 || err != nil {
			b.Fatal(v, err)
		}
	}
}

func BenchmarkOutboundEmpty(b *testing.B) { runOurs(b, ourEmpty) }
func BenchmarkOutboundEmptyFailsafe(b *testing.B) {
	runFailsafe(b, failsafe.With[int]())
}
func BenchmarkOutboundRetryBreakerTimeout(b *testing.B) { runOurs(b, ourRetryBreakerTimeout) }
func BenchmarkOutboundRetryBreakerTimeoutFailsafe(b *testing.B) {
	runFailsafe(b, failsafeRetryBreakerTimeout())
}

// TestOutboundContendersSucceed protects the benchmarks' premise: both
// compositions, as configured, return the callback's value on the success
// path, so no figure is the cost of a failure or a retry.
func TestOutboundContendersSucceed(t *testing.T) {
	for _, build := range []func() (*resilience.Pipeline[int], error){ourEmpty, ourRetryBreakerTimeout} {
		p, err := build()
		if err != nil {
			t.Fatal(err)
		}
		if v, err := p.Execute(context.Background(), okCall); v != 1 || err != nil {
			t.Fatal(v, err)
		}
	}
	for _, ex := range []failsafe.Executor[int]{failsafe.With[int](), failsafeRetryBreakerTimeout()} {
		if v, err := ex.WithContext(context.Background()).Get(func() (int, error) { return 1, nil }); v != 1 || err != nil {
			t.Fatal(v, err)
		}
	}
}
