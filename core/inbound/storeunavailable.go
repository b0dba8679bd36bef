package inbound

import (
	"context"
	"errors"

	resilience "github.com/ylcnfrht/resilience/core"
)

// storeFailedClosed reports whether err refused a request because the
// rate limiter's store failed and the limiter fails closed: a 503 counted
// as RequestCounts.StoreUnavailable, apart from the 429s of clients over
// their quota. A request whose own context ended during the take is
// counted as canceled instead (it gets no answer).
func storeFailedClosed(err error) bool {
	return errors.Is(err, resilience.ErrRateLimitStore) && !errors.Is(err, context.Canceled)
}
