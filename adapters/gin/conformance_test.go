package resiliencegin_test

import (
	"testing"

	"github.com/gin-gonic/gin"

	resiliencegin "github.com/ylcnfrht/resilience/adapters/gin"
	"github.com/ylcnfrht/resilience/conformance"
)

// ginHarness mounts the suite the way a gin user would: the health route
// on the engine, everything else in a group that uses the middleware.
// fallback sets gin.Engine.ContextWithFallback.
func ginHarness(fallback bool) conformance.Harness {
	name := "gin"
	if fallback {
		name = "gin-fallback"
	}
	return conformance.Harness{
		Name: name,
		Start: func(cfg conformance.Config) (*conformance.Server, error) {
			mw, err := resiliencegin.New(cfg.Options)
			if err != nil {
				return nil, err
			}
			e := gin.New()
			e.ContextWithFallback = fallback
			e.GET(conformance.HealthPath, gin.WrapH(cfg.Health))
			// Every other path behind the middleware. gin allows no
			// catch-all beside /healthz at the root, so one segment and
			// below are routed separately.
			g := e.Group("/", mw.Handler)
			h := gin.WrapH(cfg.Handler)
			g.Any("/", h)
			g.Any("/:first", h)
			g.Any("/:first/*rest", h)
			g.Any("/route/:id", h) // conformance.RoutePattern
			// Served directly, as the quick start does: the middleware
			// ends an HTTP/2 504's stream itself.
			return conformance.NewHTTPServer(e, mw.Inbound().Stats)
		},
	}
}

// TestConformance: the gin adapter behaves as the inbound table specifies,
// with gin's context fallback off (the default) and on.
func TestConformance(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	t.Run("fallback-off", func(t *testing.T) { conformance.Run(t, ginHarness(false)) })
	t.Run("fallback-on", func(t *testing.T) { conformance.Run(t, ginHarness(true)) })
}
