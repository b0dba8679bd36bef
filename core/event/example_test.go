package event_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// A listener that counts retries by pipeline, the way a metrics exporter
// would.
func Example() {
	retries := map[string]int{}
	count := event.ListenerFunc(func(_ context.Context, e event.Event) {
		if e.Name == event.Retry {
			retries[e.Pipeline]++
		}
	})
	p, err := resilience.NewBuilder[string](resilience.WithName("inventory"), resilience.WithListener(count)).
		AddRetry(resilience.RetryOptions[string]{MaxRetryAttempts: 2}).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	calls := 0
	v, err := p.Execute(context.Background(), func(context.Context) (string, error) {
		if calls++; calls < 3 {
			return "", errors.New("busy")
		}
		return "ok", nil
	})
	fmt.Println(v, err, retries["inventory"])
	// Output: ok <nil> 2
}
