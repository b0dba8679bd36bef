package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/property"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// A per-client limit of two calls a minute. The client's identity rides in
// the context as a typed property; a third call within the minute is
// refused with the time to wait, and another client is unaffected.
func ExampleRateLimiter() {
	client := property.NewKey[string]("client")
	p, err := resilience.NewBuilder[string](resilience.WithName("search")).
		AddRateLimiter(resilience.RateLimiterOptions{
			Name:        "per-client",
			Algorithm:   ratelimit.FixedWindow,
			PermitLimit: 2,
			Window:      time.Minute,
			Key: func(ctx context.Context) string {
				id, _ := client.Value(ctx)
				return id
			},
		}).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	search := func(ctx context.Context) (string, error) { return "results", nil }

	alice := client.With(context.Background(), "alice")
	for i := 1; i <= 3; i++ {
		res, err := p.Execute(alice, search)
		var rej *resilience.RateLimitRejectedError
		if errors.As(err, &rej) {
			fmt.Printf("alice call %d: rejected, limit %d, remaining %d, retry within a minute: %v\n",
				i, rej.Limit, rej.Remaining, rej.RetryAfter > 0 && rej.RetryAfter <= time.Minute)
			continue
		}
		fmt.Printf("alice call %d: %s\n", i, res)
	}
	res, _ := p.Execute(client.With(context.Background(), "bob"), search)
	fmt.Println("bob:", res)
	// Output:
	// alice call 1: results
	// alice call 2: results
	// alice call 3: rejected, limit 2, remaining 0, retry within a minute: true
	// bob: results
}

// Allow gives the numbers for the RateLimit-* headers without running
// anything, as an HTTP middleware needs on admitted responses too.
func ExampleRateLimiter_Allow() {
	l, err := resilience.NewRateLimiter(resilience.RateLimiterOptions{
		Algorithm:   ratelimit.TokenBucket,
		PermitLimit: 10,
		Window:      time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	d, _ := l.Allow(context.Background())
	fmt.Printf("allowed=%v limit=%d remaining=%d policy=%s/%s\n",
		d.Allowed, d.Limit, d.Remaining, d.Policy.Name, d.Policy.Algorithm)
	// Output:
	// allowed=true limit=10 remaining=9 policy=default/token-bucket
}
