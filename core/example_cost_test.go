package resilience_test

import (
	"context"
	"fmt"

	resilience "github.com/ylcnfrht/resilience/core"
)

// An export takes 4 of 5 permits: a second export cannot start beside it,
// a read can, and the permit returns all 4.
func ExampleConcurrencyLimiter_AcquireN() {
	limiter, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 5})
	if err != nil {
		fmt.Println(err)
		return
	}
	export, err := limiter.AcquireN(context.Background(), 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("export holds", export.Permits(), "permits")
	if _, ok := limiter.TryAcquireN(4); !ok {
		fmt.Println("a second export: refused")
	}
	if read, ok := limiter.TryAcquireN(1); ok {
		fmt.Println("a read: admitted")
		read.Release()
	}
	export.Release()
	fmt.Println("in flight after:", limiter.Stats().InFlight)
	// Output:
	// export holds 4 permits
	// a second export: refused
	// a read: admitted
	// in flight after: 0
}
