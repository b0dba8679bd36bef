package conformance_test

import (
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/ylcnfrht/resilience/conformance"
	"github.com/ylcnfrht/resilience/core/inbound"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// netHTTPHarness runs the suite against core/inbound's own net/http
// middleware: the reference every adapter is held to.
func netHTTPHarness() conformance.Harness {
	return conformance.Harness{
		Name: "net/http",
		Start: func(cfg conformance.Config) (*conformance.Server, error) {
			m, err := inbound.New(cfg.Options)
			if err != nil {
				return nil, err
			}
			mux := http.NewServeMux()
			mux.Handle("GET "+conformance.HealthPath, cfg.Health) // before (outside) the middleware
			mux.Handle("/", m.Handler(cfg.Handler))
			mux.Handle(conformance.RoutePattern, m.Handler(cfg.Handler))
			return conformance.NewHTTPServer(mux, m.Stats)
		},
	}
}

// TestNetHTTP: the inbound net/http middleware passes every case in full,
// except those listed as known failing.
func TestNetHTTP(t *testing.T) {
	conformance.Run(t, netHTTPHarness())
}
