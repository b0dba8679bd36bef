package resilience

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// composed builds the recommended order (doc.go, "Composition"):
// fallback → total timeout → retry → circuit breaker → attempt timeout.
func composed(t *testing.T, total time.Duration, seen *error) (*Pipeline[int], *CircuitBreaker[int]) {
	t.Helper()
	cb, err := NewCircuitBreaker(CircuitBreakerOptions[int]{FailureRatio: 1, MinimumThroughput: 3, BreakDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewBuilder[int]().
		AddFallback(FallbackOptions[int]{FallbackValue: -1, OnFallback: func(_ context.Context, o Outcome[int]) { *seen = o.Err }}).
		AddTimeout(TimeoutOptions{Timeout: total}).
		AddRetry(RetryOptions[int]{MaxRetryAttempts: 5, Delay: 100 * time.Millisecond}).
		AddResultStrategy(cb).
		AddTimeout(TimeoutOptions{Timeout: time.Second}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return p, cb
}

func hang(ctx context.Context) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// Invariant: in the documented order the attempt timeout fails each
// attempt, the breaker inside the retry counts every attempt and then
// fails the remaining retries fast, and the fallback outside everything
// answers the final failure once.
func TestCompositionOrderAttemptsBreakerFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen error
		p, cb := composed(t, 10*time.Second, &seen)
		calls := 0
		start := time.Now()
		v, err := p.Execute(context.Background(), func(ctx context.Context) (int, error) { calls++; return hang(ctx) })
		if v != -1 || err != nil {
			t.Fatalf("got %d, %v; want the fallback", v, err)
		}
		// Three attempts time out (0-1s, 1.1-2.1s, 2.2-3.2s) and open the
		// circuit; three more retries are refused by it, 100 ms apart.
		if calls != 3 || time.Since(start) != 3500*time.Millisecond {
			t.Fatalf("%d calls in %v", calls, time.Since(start))
		}
		if !errors.Is(seen, ErrBrokenCircuit) || cb.State() != CircuitOpen {
			t.Fatalf("fallback saw %v; breaker %v", seen, cb.State())
		}
	})
}

// Invariant: the total timeout outside the retry bounds every attempt and
// delay together, and is what the fallback sees.
func TestCompositionOrderTotalTimeoutBoundsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen error
		p, _ := composed(t, 2500*time.Millisecond, &seen)
		start := time.Now()
		v, _ := p.Execute(context.Background(), hang)
		var te *TimeoutRejectedError
		if v != -1 || time.Since(start) != 2500*time.Millisecond || !errors.As(seen, &te) || te.Timeout != 2500*time.Millisecond {
			t.Fatalf("got %d after %v; fallback saw %v", v, time.Since(start), seen)
		}
	})
}
