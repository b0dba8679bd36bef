package resilience_test

import (
	"context"
	"fmt"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

func ExampleHedging() {
	p, _ := resilience.NewBuilder[string]().
		AddHedging(resilience.HedgingOptions[string]{
			MaxHedgedAttempts: 1,
			Delay:             5 * time.Millisecond,
			// Send the hedge to the other replica.
			ActionGenerator: func(attempt int, next resilience.ResultNext[string]) resilience.ResultNext[string] {
				return func(ctx context.Context) (string, error) { return "replica-b", nil }
			},
		}).
		Build()
	v, err := p.Execute(context.Background(), func(ctx context.Context) (string, error) {
		<-ctx.Done() // replica a hangs; it is cancelled once b answers
		return "", ctx.Err()
	})
	fmt.Println(v, err)
	// Output: replica-b <nil>
}
