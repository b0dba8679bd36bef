package resilience_test

import (
	"context"
	"fmt"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// The per-dependency recipe: a slow dependency behind a
// concurrency limiter and a timeout, answered by an empty list when shed,
// so the page still renders.
func ExampleFallback() {
	p, err := resilience.NewBuilder[[]string](resilience.WithName("recommendations")).
		AddFallback(resilience.FallbackOptions[[]string]{
			FallbackValue: []string{},
			OnFallback: func(_ context.Context, o resilience.Outcome[[]string]) {
				fmt.Println("fallback for:", o.Err)
			},
		}).
		AddConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 20}).
		AddTimeout(resilience.TimeoutOptions{Timeout: 10 * time.Millisecond}).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	recs, err := p.Execute(context.Background(), func(ctx context.Context) ([]string, error) {
		<-ctx.Done() // the dependency is too slow today
		return nil, ctx.Err()
	})
	fmt.Println(len(recs), recs != nil, err)
	// Output:
	// fallback for: resilience: execution timed out after 10ms
	// 0 true <nil>
}
