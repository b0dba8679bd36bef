package resiliencechi_test

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/ylcnfrht/resilience/adapters/chi"
	"github.com/ylcnfrht/resilience/conformance"
)

// chiHarness mounts the suite the way a chi user would: the health route
// on the router, everything else in a group that uses the middleware (chi
// runs a group's middleware once it has routed).
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
				r.Handle(conformance.RoutePattern, cfg.Handler)
			})
			return conformance.NewHTTPServer(r, mw.Inbound().Stats)
		},
	}
}

// chiRootUseHarness mounts the middleware with Use at the root of a
// router, where it runs before chi has routed: the route must come from
// the adapter's lookup. The health route sits on an outer router.
func chiRootUseHarness() conformance.Harness {
	return conformance.Harness{
		Name: "chi (root Use)",
		Start: func(cfg conformance.Config) (*conformance.Server, error) {
			mw, err := resiliencechi.New(cfg.Options)
			if err != nil {
				return nil, err
			}
			app := chi.NewRouter()
			app.Use(mw.Handler)
			app.Handle("/*", cfg.Handler)
			app.Handle(conformance.RoutePattern, cfg.Handler)
			r := chi.NewRouter()
			r.Method(http.MethodGet, conformance.HealthPath, cfg.Health)
			r.Mount("/", app)
			return conformance.NewHTTPServer(r, mw.Inbound().Stats)
		},
	}
}

// TestConformance: the chi adapter behaves as the inbound table specifies,
// in a group and at a router's root.
func TestConformance(t *testing.T) {
	conformance.Run(t, chiHarness())
}

func TestConformanceRootUse(t *testing.T) {
	conformance.Run(t, chiRootUseHarness())
}
