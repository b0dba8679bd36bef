package resilience

import (
	"context"
	"testing"
)

// BenchmarkExecuteFreePermitWithFlow is the admitted fast path (a free
// permit) of both limiters without and with a Flow function, in one run:
// the flow function never runs there, so each "flow" case must cost what
// the case before it costs, with no allocation.
func BenchmarkExecuteFreePermitWithFlow(b *testing.B) {
	flow := func(context.Context) string { return "tenant" }
	ok := func(context.Context) error { return nil }
	for _, bc := range []struct {
		name string
		s    Strategy
	}{
		{"fixed", newTestLimiter(b, ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 100})},
		{"fixed-flow", newTestLimiter(b, ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 100, Flow: flow})},
		{"adaptive", mustAdaptive(b, AdaptiveLimiterOptions{InitialLimit: 100, QueueLimit: 100, IgnoreCPUWait: true})},
		{"adaptive-flow", mustAdaptive(b, AdaptiveLimiterOptions{InitialLimit: 100, QueueLimit: 100, IgnoreCPUWait: true, Flow: flow})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.s.Execute(ctx, Telemetry{}, ok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func mustAdaptive(tb testing.TB, o AdaptiveLimiterOptions) *AdaptiveLimiter {
	tb.Helper()
	a, err := NewAdaptiveLimiter(o)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}
