package resilience

import (
	"context"
	"testing"
)

// The adaptive limiter's admitted fast path against the fixed limiter's,
// in the same run: target at most twice the cost, no allocation.
func BenchmarkAdaptiveVsFixedAcquireRelease(b *testing.B) {
	b.Run("fixed", func(b *testing.B) {
		l := newTestLimiter(b, ConcurrencyLimiterOptions{PermitLimit: 1})
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Acquire(ctx); err != nil {
				b.Fatal(err)
			}
			l.Release()
		}
	})
	b.Run("adaptive", func(b *testing.B) {
		a := newTestAdaptive(b, AdaptiveLimiterOptions{InitialLimit: 100, MaxLimit: 100})
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			p, err := a.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			p.Release(LimitSampled)
		}
	})
}

// Execute as a strategy, fixed against adaptive (the adaptive one also
// classifies the result).
func BenchmarkAdaptiveVsFixedExecute(b *testing.B) {
	next := func(context.Context) error { return nil }
	ctx := context.Background()
	b.Run("fixed", func(b *testing.B) {
		l := newTestLimiter(b, ConcurrencyLimiterOptions{PermitLimit: 100})
		b.ReportAllocs()
		for b.Loop() {
			_ = l.Execute(ctx, Telemetry{}, next)
		}
	})
	b.Run("adaptive", func(b *testing.B) {
		a := newTestAdaptive(b, AdaptiveLimiterOptions{InitialLimit: 100, MaxLimit: 100})
		b.ReportAllocs()
		for b.Loop() {
			_ = a.Execute(ctx, Telemetry{}, next)
		}
	})
}
