package conformance_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ylcnfrht/resilience/conformance"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestNetHTTP: the inbound net/http middleware passes every case in full,
// except those listed as known failing. Its harness (example_test.go) is
// ExampleRun's, the reference every adapter is held to.
func TestNetHTTP(t *testing.T) {
	conformance.Run(t, netHTTPHarness())
}
