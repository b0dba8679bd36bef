package budget_test

import (
	"context"
	"errors"
	"fmt"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/budget"
)

// One budget shared by the retries of two pipelines that call the same
// dependency: while it fails, the retries stay within a tenth of the
// calls, however many retries each pipeline is allowed.
func Example() {
	b, err := budget.New(budget.Options{
		Ratio:        0.1, // the default: a tenth of the first attempts
		MinPerSecond: -1,  // no floor, to keep the example exact
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	opts := resilience.RetryOptions[string]{MaxRetryAttempts: 3, Budget: b}
	reads, _ := resilience.NewBuilder[string](resilience.WithName("reads")).AddRetry(opts).Build()
	writes, _ := resilience.NewBuilder[string](resilience.WithName("writes")).AddRetry(opts).Build()

	attempts := 0
	down := func(context.Context) (string, error) { attempts++; return "", errors.New("unavailable") }
	for range 50 {
		reads.Execute(context.Background(), down)
		writes.Execute(context.Background(), down)
	}
	s := b.Stats()
	fmt.Printf("100 calls, %d attempts: %d retries allowed, %d denied\n", attempts, s.Allowed, s.Denied)
	// Output: 100 calls, 110 attempts: 10 retries allowed, 100 denied
}
