package inbound_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// An export costs ten reads, in permits and in rate-limit tokens: the
// same Cost function, reading the request view, serves both.
func ExampleOptions_cost() {
	cost := func(ctx context.Context) int {
		if r, _ := inbound.RequestFrom(ctx); r.Path == "/export" {
			return 10
		}
		return 1
	}
	m, err := inbound.New(inbound.Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 10, Cost: cost},
		RateLimit:   &resilience.RateLimiterOptions{PermitLimit: 15, Window: time.Minute, Cost: cost},
	})
	if err != nil {
		panic(err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.URL.Path, "runs with", m.Stats().InFlight, "permits in flight")
	}))
	for _, path := range []string{"/export", "/read", "/export"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		fmt.Println(path, w.Code, "tokens left", w.Header().Get("RateLimit-Remaining"))
	}
	// Output:
	// /export runs with 10 permits in flight
	// /export 200 tokens left 5
	// /read runs with 1 permits in flight
	// /read 200 tokens left 4
	// /export 429 tokens left 4
}
