package worker

import (
	"testing"

	"go.uber.org/goleak"
)

// Invariant 4: no goroutine or timer outlives the request that made it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
