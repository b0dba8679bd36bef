package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

func ExampleTimeoutOptions_onTimeout() {
	p, err := resilience.NewBuilder[string]().
		AddTimeout(resilience.TimeoutOptions{
			Timeout: 10 * time.Millisecond,
			OnTimeout: func(_ context.Context, timeout time.Duration) {
				fmt.Println("timed out after", timeout)
			},
		}).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = p.Execute(context.Background(), func(ctx context.Context) (string, error) {
		<-ctx.Done() // a slow dependency that watches its context
		return "", ctx.Err()
	})
	fmt.Println(errors.Is(err, resilience.ErrTimeoutRejected))
	// Output:
	// timed out after 10ms
	// true
}
