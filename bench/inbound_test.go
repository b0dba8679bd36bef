package bench

import (
	"net/http"
	"testing"

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

func BenchmarkInboundLimiter(b *testing.B)        { serve(b, mustBuild(b, ours[0])) }
func BenchmarkInboundLimiterTimeout(b *testing.B) { serve(b, mustBuild(b, ours[1])) }
