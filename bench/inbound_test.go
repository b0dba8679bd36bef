package bench

import (
	"context"
	"net/http"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// ours are the project's own stacks, configured like the peers.
var ours = []contender{
	{"InboundLimiter", func() (http.Handler, error) {
		return inboundHandler(inbound.Options{Concurrency: limiterOptions()})
	}},
	{"InboundLimiterTimeout", func() (http.Handler, error) {
		return inboundHandler(inbound.Options{Concurrency: limiterOptions(), Timeout: reqTimeout})
	}},
	// A Priority function is configured but never runs: a permit is free.
	{"InboundLimiterPriority", func() (http.Handler, error) {
		c := limiterOptions()
		c.Priority = func(context.Context) int { return 0 }
		return inboundHandler(inbound.Options{Concurrency: c})
	}},
	// A rate-limit key function runs on every request: the view's floor.
	{"InboundLimiterRateLimitKey", func() (http.Handler, error) {
		return inboundHandler(inbound.Options{Concurrency: limiterOptions(), RateLimit: &resilience.RateLimiterOptions{
			PermitLimit: 1 << 30, Window: time.Hour, Key: func(context.Context) string { return "k" },
		}})
	}},
}

func limiterOptions() *resilience.ConcurrencyLimiterOptions {
	return &resilience.ConcurrencyLimiterOptions{
		PermitLimit:  permitLimit,
		QueueLimit:   queueLimit,
		QueueTimeout: queueTimeout,
	}
}

func inboundHandler(opts inbound.Options) (http.Handler, error) {
	m, err := inbound.New(opts)
	if err != nil {
		return nil, err
	}
	return m.Handler(trivial), nil
}

func allContenders() []contender { return append(append([]contender{}, peers...), ours...) }

func BenchmarkInboundLimiter(b *testing.B)         { serve(b, mustBuild(b, ours[0])) }
func BenchmarkInboundLimiterTimeout(b *testing.B)  { serve(b, mustBuild(b, ours[1])) }
func BenchmarkInboundLimiterPriority(b *testing.B) { serve(b, mustBuild(b, ours[2])) }
func BenchmarkInboundLimiterRateLimitKey(b *testing.B) {
	serve(b, mustBuild(b, ours[3]))
}
