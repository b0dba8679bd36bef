package inbound_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// The configuration docs/guide.md recommends for a service that can do
// about 500 requests a second at 200 ms each, called with a 2 s budget.
func ExampleNew_recommended() {
	m, err := inbound.New(inbound.Options{
		Timeout: 1500 * time.Millisecond, // below the caller's 2 s
		Concurrency: &resilience.ConcurrencyLimiterOptions{
			PermitLimit:  100,                    // 500 req/s × 0.2 s (Little's law), then load-tested
			QueueLimit:   100,                    // at most the permit limit
			QueueTimeout: 300 * time.Millisecond, // well under the budget
			CoDel:        &resilience.CoDelOptions{},
			Priority: func(ctx context.Context) int { // lower is more important
				if r, ok := inbound.RequestFrom(ctx); ok && r.Header.Get("X-Priority") == "0" {
					return 0
				}
				return 5
			},
		},
		RateLimit: &resilience.RateLimiterOptions{ // fairness: no client takes every permit
			Algorithm:   ratelimit.TokenBucket,
			PermitLimit: 100, // per second and client
			Window:      time.Second,
			Key:         by.ClientIP,
		},
	})
	if err != nil {
		panic(err) // a *resilience.ConfigError naming the field
	}
	fmt.Println(m.Stats().Limit)
	// Output: 100
}

// The adaptive limiter instead of a fixed permit limit, for a service
// whose capacity is not known or moves.
func ExampleNew_adaptive() {
	m, err := inbound.New(inbound.Options{
		Timeout: 1500 * time.Millisecond,
		Adaptive: &resilience.AdaptiveLimiterOptions{
			MaxLimit: 400, // a ceiling you would accept as a fixed limit
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Stats().Limit > 0)
	// Output: true
}

// Health checks go outside the middleware, so a loaded instance still
// answers its probes, and Drain runs before http.Server.Shutdown.
func ExampleMiddleware_Handler_healthCheck() {
	m, err := inbound.New(inbound.Options{
		Timeout:     1500 * time.Millisecond,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
	})
	if err != nil {
		panic(err)
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {}) // never shed
	mux.Handle("/debug/limits", m.StatsHandler())
	mux.Handle("/", m.Handler(api))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second, // the whole request, body included (not the handler)
		IdleTimeout:       60 * time.Second, // idle keep-alive connections are closed
	}

	// At shutdown: Drain, then Shutdown, under one grace period; no more
	// keep-alives, so running handlers' answers close their connections.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.SetKeepAlivesEnabled(false)
	_ = m.Drain(ctx)
	_ = srv.Shutdown(ctx)

	for _, path := range []string{"/healthz", "/"} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		fmt.Println(path, w.Code)
	}
	// Output:
	// /healthz 200
	// / 503
}
