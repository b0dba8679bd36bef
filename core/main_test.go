package resilience

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine they started is still
// running when they finish (invariant 4: no goroutine or timer outlives the
// execution that made it).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
