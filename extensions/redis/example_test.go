package resilienceredis_test

import (
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/ratelimit"
	resilienceredis "github.com/ylcnfrht/resilience/extensions/redis"
)

// A fleet-wide limit of 600 requests a minute per API key, failing open
// within 50 ms when Redis does not answer, behind a circuit breaker.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	breaker, err := resilience.NewCircuitBreaker(resilience.CircuitBreakerOptions[ratelimit.Decision]{
		Name: "redis", MinimumThroughput: 20, BreakDuration: 2 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	store, err := resilienceredis.New(resilienceredis.Options{
		Client:  client,
		Prefix:  "shop:rl:",
		Budget:  50 * time.Millisecond,
		Breaker: breaker,
	})
	if err != nil {
		panic(err)
	}
	mw, err := inbound.New(inbound.Options{RateLimit: &resilience.RateLimiterOptions{
		Name: "api", Algorithm: ratelimit.SlidingWindow, PermitLimit: 600, Window: time.Minute,
		Key: by.Header("X-API-Key"), Store: store,
	}})
	if err != nil {
		panic(err)
	}
	// Fail at startup, not per request, on a policy the store cannot apply.
	if err := store.CheckPolicy(mw.RateLimiter().Policy()); err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	// http.ListenAndServe(":8080", mux)
}
