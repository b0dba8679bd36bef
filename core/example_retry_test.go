package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

func ExampleRetry() {
	p, err := resilience.NewBuilder[string](resilience.WithName("inventory")).
		AddRetry(resilience.RetryOptions[string]{
			MaxRetryAttempts: 3,
			Delay:            time.Millisecond,
			BackoffType:      resilience.BackoffExponential,
			UseJitter:        true,
			OnRetry: func(_ context.Context, a resilience.RetryArgs[string]) {
				fmt.Println("retry after attempt", a.Attempt, "failed:", a.Outcome.Err)
			},
		}).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	calls := 0
	v, err := p.Execute(context.Background(), func(ctx context.Context) (string, error) {
		if calls++; calls < 3 {
			return "", errors.New("connection reset")
		}
		return "42 in stock", nil
	})
	fmt.Println(v, err)
	// Output:
	// retry after attempt 0 failed: connection reset
	// retry after attempt 1 failed: connection reset
	// 42 in stock <nil>
}

// A predicate on the outcome retries a value, not only an error.
func ExampleRetryOptions_shouldHandle() {
	p, _ := resilience.NewBuilder[int]().
		AddRetry(resilience.RetryOptions[int]{
			MaxRetryAttempts: 3,
			ShouldHandle:     func(o resilience.Outcome[int]) bool { return o.Err != nil || o.Value == 503 },
		}).
		Build()
	statuses := []int{503, 503, 200}
	status, _ := p.Execute(context.Background(), func(ctx context.Context) (int, error) {
		s := statuses[0]
		statuses = statuses[1:]
		return s, nil
	})
	fmt.Println(status)
	// Output: 200
}
