package conformance_test

import (
	"net/http"
	"testing"

	"github.com/ylcnfrht/resilience/conformance"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// The conformance test of an adapter, here with a plain net/http
// ServeMux as "the framework" and the inbound middleware as the adapter.
// It goes in the adapter's _test.go as a test function; run it with
// go test -race. (This package's TestNetHTTP runs this very harness, so
// the example is proved on every test run; it has no output of its own,
// since Run needs the *testing.T of a test.)
func ExampleRun() {
	testConformance := func(t *testing.T) {
		conformance.Run(t, netHTTPHarness())
	}
	_ = testConformance
}

// netHTTPHarness starts the adapter under test for each case: the
// middleware from the case's options, the health route outside it, every
// other path behind it, and RoutePattern for the request-view case.
func netHTTPHarness() conformance.Harness {
	return conformance.Harness{
		Name: "net/http",
		Start: func(cfg conformance.Config) (*conformance.Server, error) {
			m, err := inbound.New(cfg.Options)
			if err != nil {
				return nil, err // a rejected configuration fails the case
			}
			mux := http.NewServeMux()
			mux.Handle("GET "+conformance.HealthPath, cfg.Health) // outside the middleware
			mux.Handle("/", m.Handler(cfg.Handler))               // every method and path
			mux.Handle(conformance.RoutePattern, m.Handler(cfg.Handler))
			return conformance.NewHTTPServer(mux, m.Stats)
		},
		// A framework that cannot do something declares it, with the
		// reason users will read:
		// Missing: map[conformance.Capability]string{conformance.CapDisconnect: "…"},
	}
}
