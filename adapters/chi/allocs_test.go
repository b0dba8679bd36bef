//go:build !race

package resiliencechi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"

	"github.com/ylcnfrht/resilience/adapters/chi"
)

// The view costs nothing until something reads it: behind chi's r.Use, a
// request that finds a free permit allocates no more with the adapter and
// a Priority function (which then never runs) than through the bare
// router, with the fixed and the adaptive limiter: the adapter copies no
// request and looks no route up. (Without the race detector, which
// allocates itself.)
func TestAdmittedAllocatesNothingBeyondChi(t *testing.T) {
	priority := func(context.Context) int {
		t.Error("the priority function ran with a free permit")
		return 0
	}
	router := func(mw func(http.Handler) http.Handler) http.Handler {
		r := chi.NewRouter()
		if mw != nil {
			r.Use(mw)
		}
		r.Get("/users/{id}", func(w http.ResponseWriter, r *http.Request) {})
		return r
	}
	w := &discardWriter{h: http.Header{}}
	req := httptest.NewRequest(http.MethodGet, "/users/7", nil)
	allocs := func(h http.Handler) float64 {
		return testing.AllocsPerRun(200, func() { h.ServeHTTP(w, req) })
	}
	bare := allocs(router(nil))
	for name, c := range map[string]struct {
		opts inbound.Options
		// own is what the limiter itself allocates per request: the
		// adaptive limiter's status recorder, with or without Priority.
		own float64
	}{
		"fixed":    {inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 10, QueueLimit: 10, Priority: priority}}, 0},
		"adaptive": {inbound.Options{Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 10, QueueLimit: 10, Priority: priority}}, 1},
	} {
		mw, err := resiliencechi.NewMiddleware(c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := allocs(router(mw)); got != bare+c.own {
			t.Errorf("%s with a Priority function: %v allocations per admitted request, the bare router %v: want %v",
				name, got, bare, bare+c.own)
		}
	}
}
