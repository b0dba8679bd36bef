package conformance

import (
	"context"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"strconv"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// Request headers the suite's priority and key functions read through the
// request view (inbound.RequestFrom), so the cases also check that the
// adapter fills the view in.
const (
	clientHeader   = "X-Conformance-Client"
	priorityHeader = "X-Conformance-Priority"
)

// limited is the inbound configuration of most cases: a timeout and a
// concurrency limiter.
func limited(timeout time.Duration, c resilience.ConcurrencyLimiterOptions) inbound.Options {
	return inboundOptions(timeout, &c, nil)
}

// inboundOptions builds the adapter's configuration; nil leaves a stage
// out.
func inboundOptions(timeout time.Duration, c *resilience.ConcurrencyLimiterOptions, rl *resilience.RateLimiterOptions) inbound.Options {
	return inbound.Options{Timeout: timeout, Concurrency: c, RateLimit: rl}
}

// priorityFromHeader ranks a request by its priority header (lower runs
// sooner; absent or malformed is 0).
func priorityFromHeader(ctx context.Context) int {
	r, ok := inbound.RequestFrom(ctx)
	if !ok {
		return 0
	}
	p, _ := strconv.Atoi(r.Header.Get(priorityHeader))
	return p
}

// perClientRateLimit allows n requests per client (keyed by clientHeader)
// in a window long enough never to roll over during a case.
func perClientRateLimit(n int) *resilience.RateLimiterOptions {
	return &resilience.RateLimiterOptions{
		PermitLimit: n,
		Window:      time.Hour,
		Key:         by.Header(clientHeader),
	}
}
