package resiliencegrpc_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a late
// handler, a queued call or a server the middleware did not let go.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
