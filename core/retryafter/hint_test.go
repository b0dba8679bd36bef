package retryafter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/retryafter"
)

var errDependency = errors.New("dependency failed")

// hintErr carries a server's Retry-After.
type hintErr struct{ d time.Duration }

func (e hintErr) Error() string                 { return "slow down" }
func (e hintErr) RetryAfterHint() time.Duration { return e.d }

// Invariant: Delay waits what the outcome asks for (and the
// backoff otherwise), capped by MaxDelay.
func TestRetryDelayGeneratorHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []time.Duration
		p, err := resilience.NewBuilder[int]().AddRetry(resilience.RetryOptions[int]{
			MaxRetryAttempts: 3, Delay: time.Second, MaxDelay: 10 * time.Second,
			DelayGenerator: retryafter.Delay[int],
			OnRetry:        func(_ context.Context, a resilience.RetryArgs[int]) { seen = append(seen, a.Delay) },
		}).Build()
		if err != nil {
			t.Fatal(err)
		}
		errs := []error{
			hintErr{5 * time.Second},
			fmt.Errorf("wrapped: %w", &resilience.RateLimitRejectedError{RetryAfter: 7 * time.Second}),
			hintErr{time.Hour}, // capped
			errDependency,
		}
		n := 0
		start := time.Now()
		_, err = p.Execute(context.Background(), func(context.Context) (int, error) {
			n++
			return 0, errs[n-1]
		})
		if err != errDependency {
			t.Fatalf("err = %v", err)
		}
		want := []time.Duration{5 * time.Second, 7 * time.Second, 10 * time.Second}
		if fmt.Sprint(seen) != fmt.Sprint(want) || time.Since(start) != 22*time.Second {
			t.Fatalf("delays %v after %v, want %v after 22s", seen, time.Since(start), want)
		}
	})
}
