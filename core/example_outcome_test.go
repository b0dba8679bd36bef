package resilience_test

import (
	"context"
	"errors"
	"fmt"

	resilience "github.com/ylcnfrht/resilience/core"
)

func ExamplePipeline_ExecuteOutcome() {
	p, _ := resilience.NewBuilder[int]().Build()
	o := p.ExecuteOutcome(context.Background(), func(ctx context.Context) (int, error) {
		return 0, errors.New("not found")
	})
	switch {
	case errors.Is(o.Err, resilience.ErrRejected):
		fmt.Println("shed")
	case o.Failed():
		fmt.Println("failed:", o.Err)
	default:
		fmt.Println("value:", o.Value)
	}
	// Output: failed: not found
}
