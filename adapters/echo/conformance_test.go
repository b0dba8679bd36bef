package resilienceecho_test

import (
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/ylcnfrht/resilience/adapters/echo"
	"github.com/ylcnfrht/resilience/conformance"
)

// echoHarness mounts the suite the way an echo user would: the health
// route on the engine, everything else in a group that uses the
// middleware, with echo's default error handler.
func echoHarness() conformance.Harness {
	return conformance.Harness{
		Name:         "echo",
		KnownFailing: map[string]string{"timeout-http2-clean-end": "under Serve the framework owns ServeHTTP: the 504 is whole at the deadline, but HTTP/2 ends a stream only when ServeHTTP returns, so the stream is reset after the 504 instead (issue 21, item 6)"},
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
			return conformance.NewHTTPServer(e, mw.Inbound().Stats)
		},
	}
}

// TestConformance: the echo adapter behaves as the inbound table
// specifies.
func TestConformance(t *testing.T) {
	conformance.Run(t, echoHarness())
}
