package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// Two rate limiters that share one in-memory store, under distinct policy
// names, each capped at 1000 keys together.
func Example() {
	store := ratelimit.NewMemoryStore(1000)
	search, err := resilience.NewRateLimiter(resilience.RateLimiterOptions{
		Name: "search", Algorithm: ratelimit.TokenBucket, PermitLimit: 10, Window: time.Second, Store: store,
	})
	if err != nil {
		log.Fatal(err)
	}
	upload, err := resilience.NewRateLimiter(resilience.RateLimiterOptions{
		Name: "upload", PermitLimit: 2, Window: time.Minute, Store: store,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	d, _ := search.AllowKey(ctx, "alice")
	fmt.Println(d.Policy.Name, d.Allowed, d.Remaining)
	d, _ = upload.AllowKey(ctx, "alice")
	fmt.Println(d.Policy.Name, d.Allowed, d.Remaining)
	fmt.Println("keys held:", store.Len())
	// Output:
	// search true 9
	// upload true 1
	// keys held: 2
}

// A store can be called directly with a policy; a refused take says when
// to come back.
func ExampleMemoryStore_Take() {
	var store ratelimit.MemoryStore // the zero value holds up to 10 000 keys
	p := ratelimit.Policy{Name: "login", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Minute}
	for range 2 {
		d, err := store.Take(context.Background(), "203.0.113.7", p)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("allowed=%v remaining=%d retry within a minute=%v\n",
			d.Allowed, d.Remaining, d.RetryAfter > 0 && d.RetryAfter <= time.Minute)
	}
	// Output:
	// allowed=true remaining=0 retry within a minute=false
	// allowed=false remaining=0 retry within a minute=true
}

// Algorithm names read from configuration are parsed leniently and
// validated.
func ExampleParseAlgorithm() {
	alg, err := ratelimit.ParseAlgorithm("Sliding_Window")
	fmt.Println(alg, err)
	_, err = ratelimit.ParseAlgorithm("leaky-bucket")
	fmt.Println(errors.Is(err, resilience.ErrInvalidOptions))
	fmt.Println(err)
	// Output:
	// sliding-window <nil>
	// true
	// resilience: invalid option Policy.Algorithm: unknown algorithm "leaky-bucket"; want one of "fixed-window", "sliding-window", "token-bucket"
}
