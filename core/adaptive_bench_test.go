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
			if _, err := l.Acquire(ctx); err != nil {
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

// The counterparts of the BenchmarkConcurrencyLimiter* benchmarks, so that
// -bench Limiter compares the two limiters in one run.

// The admitted fast path; most executions go untimed (see AdaptiveLimiter).
func BenchmarkAdaptiveLimiterAcquireRelease(b *testing.B) {
	a := newTestAdaptive(b, AdaptiveLimiterOptions{InitialLimit: 1, MaxLimit: 1})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := a.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		p.Release(LimitSampled)
	}
}

// Contended: the shared mutex, with windows closing under load.
func BenchmarkAdaptiveLimiterAcquireReleaseParallel(b *testing.B) {
	a := newTestAdaptive(b, AdaptiveLimiterOptions{InitialLimit: 1 << 20, MinLimit: 1 << 20, MaxLimit: 1 << 20})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			p, err := a.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			p.Release(LimitSampled)
		}
	})
}

// The strategy alone, with the default classifier.
func BenchmarkAdaptiveLimiterExecuteStrategy(b *testing.B) {
	a := newTestAdaptive(b, AdaptiveLimiterOptions{InitialLimit: 100, MaxLimit: 100, QueueLimit: 10})
	ctx := context.Background()
	next := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := a.Execute(ctx, Telemetry{}, next); err != nil {
			b.Fatal(err)
		}
	}
}

// Rejection under overload: no clock read, no allocation.
func BenchmarkAdaptiveLimiterRejectFull(b *testing.B) {
	a := newTestAdaptive(b, AdaptiveLimiterOptions{InitialLimit: 1, MaxLimit: 1})
	ctx := context.Background()
	p, err := a.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Release(LimitIgnored)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Acquire(ctx); err == nil {
			b.Fatal("admitted beyond the limit")
		}
	}
}
