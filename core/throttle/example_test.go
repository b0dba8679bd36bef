package throttle_test

import (
	"context"
	"errors"
	"fmt"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/throttle"
)

// A throttle in front of a dependency that sheds everything: once its
// window has seen the refusals, most calls are refused locally, at no
// cost to the dependency, with a *throttle.ThrottledError.
func Example() {
	th, err := throttle.New(throttle.Options[string]{
		K:            2,  // the default: send up to twice what is accepted
		MinPerSecond: -1, // no floor, so that the count below is about the formula alone
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := resilience.NewBuilder[string](resilience.WithName("search")).
		AddResultStrategy(th).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	sent, throttled := 0, 0
	for range 1000 {
		_, err := p.Execute(context.Background(), func(context.Context) (string, error) {
			sent++
			return "", errors.New("503 service unavailable")
		})
		if errors.Is(err, throttle.ErrThrottled) {
			throttled++
		}
	}
	fmt.Println("sent fewer than 5 % of the calls:", sent < 50, "- the rest throttled:", sent+throttled == 1000)
	// Output: sent fewer than 5 % of the calls: true - the rest throttled: true
}
