package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

func ExampleNewCircuitBreaker() {
	cb, err := resilience.NewCircuitBreaker(resilience.CircuitBreakerOptions[string]{
		FailureRatio:      0.5,
		MinimumThroughput: 4,
		BreakDuration:     30 * time.Second,
		OnOpened: func(_ context.Context, a resilience.CircuitArgs[string]) {
			fmt.Println("opened for", a.BreakDuration)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _ := resilience.NewBuilder[string](resilience.WithName("payments")).AddResultStrategy(cb).Build()
	down := func(ctx context.Context) (string, error) { return "", errors.New("503 from payments") }
	for range 4 {
		p.Execute(context.Background(), down)
	}
	_, err = p.Execute(context.Background(), down)
	var be *resilience.BrokenCircuitError
	fmt.Println(cb.State(), errors.As(err, &be), be.RetryAfter <= 30*time.Second)
	// Output:
	// opened for 30s
	// open true true
}

// Manual control takes a dependency out of service and back.
func ExampleCircuitBreaker_Isolate() {
	cb, _ := resilience.NewCircuitBreaker(resilience.CircuitBreakerOptions[int]{})
	p, _ := resilience.NewBuilder[int]().AddResultStrategy(cb).Build()
	cb.Isolate(context.Background())
	_, err := p.Execute(context.Background(), func(ctx context.Context) (int, error) { return 1, nil })
	var be *resilience.BrokenCircuitError
	fmt.Println(cb.State(), errors.As(err, &be) && be.Isolated)
	cb.Close(context.Background())
	fmt.Println(cb.State())
	// Output:
	// isolated true
	// closed
}
