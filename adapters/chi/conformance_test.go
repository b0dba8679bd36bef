package resiliencechi_test

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/ylcnfrht/resilience/adapters/chi"
	"github.com/ylcnfrht/resilience/conformance"
)

// chiHarness mounts the suite the way a chi user would: the health route
// on the router, everything else in a group that uses the middleware.
func chiHarness() conformance.Harness {
	return conformance.Harness{
		Name: "chi",
		Start: func(cfg conformance.Config) (*conformance.Server, error) {
			mw, err := resiliencechi.New(cfg.Options)
			if err != nil {
				return nil, err
			}
			r := chi.NewRouter()
			r.Method(http.MethodGet, conformance.HealthPath, cfg.Health)
			r.Group(func(r chi.Router) {
				r.Use(mw.Handler)
				r.Handle("/*", cfg.Handler)
			})
			return conformance.NewHTTPServer(r, mw.Inbound().Stats)
		},
	}
}

// TestConformance: the chi adapter behaves as the inbound table specifies.
func TestConformance(t *testing.T) {
	conformance.Run(t, chiHarness())
}
