package resiliencechi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-chi/chi/v5"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"

	"github.com/ylcnfrht/resilience/adapters/chi"
)

// A rate limit per route pattern: the key function runs before chi has
// routed the request, yet sees the pattern it will match.
func Example() {
	mw, err := resiliencechi.New(inbound.Options{
		Timeout:     5 * time.Second,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 50, QueueTimeout: 500 * time.Millisecond},
		RateLimit: &resilience.RateLimiterOptions{
			PermitLimit: 2,
			Window:      time.Minute,
			Key: func(ctx context.Context) string {
				r, _ := inbound.RequestFrom(ctx)
				return r.Route() // "/users/{id}" for every user
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {}) // never shed
	r.Group(func(r chi.Router) {
		r.Use(mw.Handler)
		r.Get("/users/{id}", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "user %s", chi.URLParam(r, "id"))
		})
	})

	for _, path := range []string{"/users/1", "/users/2", "/users/3", "/healthz"} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Println(path, rec.Code, rec.Header().Get("RateLimit-Remaining"))
	}
	// Output:
	// /users/1 200 1
	// /users/2 200 0
	// /users/3 429 0
	// /healthz 200
}

// Invalid options are reported when the middleware is built, naming the
// field.
func ExampleNew_invalid() {
	_, err := resiliencechi.New(inbound.Options{Timeout: -time.Second})
	fmt.Println(err)
	// Output:
	// resilience: invalid option Options.Timeout: must be between 0 (no timeout) and 876000h0m0s, got -1s
}
