package resilienceecho_test

import (
	"testing"

	"github.com/labstack/echo/v4"

	resilienceecho "github.com/ylcnfrht/resilience/adapters/echo"
	"github.com/ylcnfrht/resilience/conformance"
)

// echoHarness mounts the suite the way an echo user would: the health
// route on the engine, everything else in a group that uses the
// middleware, with echo's default error handler.
func echoHarness() conformance.Harness {
	return conformance.Harness{
		Name: "echo",
		Start: func(cfg conformance.Config) (*conformance.Server, error) {
			mw, err := resilienceecho.New(cfg.Options)
			if err != nil {
				return nil, err
			}
			e := echo.New()
			e.HideBanner, e.HidePort = true, true
			e.GET(conformance.HealthPath, echo.WrapHandler(cfg.Health))
			g := e.Group("", mw.Handler)
			h := echo.WrapHandler(cfg.Handler)
			g.Any("/*", h)
			g.Any("/route/:id", h) // conformance.RoutePattern
			// Served directly, as the quick start does: the middleware
			// ends an HTTP/2 504's stream cleanly by itself.
			return conformance.NewHTTPServer(e, mw.Inbound().Stats)
		},
	}
}

// TestConformance: the echo adapter behaves as the inbound table
// specifies.
func TestConformance(t *testing.T) {
	conformance.Run(t, echoHarness())
}
