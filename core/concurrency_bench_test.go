package resilience

import (
	"context"
	"testing"
)

// The fast path (a free permit, nobody queued): one uncontended lock, no
// allocation.
func BenchmarkConcurrencyLimiterAcquireRelease(b *testing.B) {
	l := newTestLimiter(b, ConcurrencyLimiterOptions{PermitLimit: 1})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
}

// Contended: every goroutine takes and returns permits from one limiter
// whose limit is never reached, so the cost is the shared mutex.
func BenchmarkConcurrencyLimiterAcquireReleaseParallel(b *testing.B) {
	l := newTestLimiter(b, ConcurrencyLimiterOptions{PermitLimit: 1 << 20})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := l.Acquire(ctx); err != nil {
				b.Error(err)
				return
			}
			l.Release()
		}
	})
}

// Through a pipeline, as the inbound middleware uses it.
func BenchmarkConcurrencyLimiterExecute(b *testing.B) {
	l := newTestLimiter(b, ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 10})
	p, err := NewBuilder[struct{}]().AddStrategy(l).Build()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	fn := func(context.Context) (struct{}, error) { return struct{}{}, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Execute(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
}

// The strategy alone, without the pipeline's own per-call cost (its result
// closure), to show the limiter adds no allocation.
func BenchmarkConcurrencyLimiterExecuteStrategy(b *testing.B) {
	l := newTestLimiter(b, ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 10})
	ctx := context.Background()
	next := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Execute(ctx, Telemetry{}, next); err != nil {
			b.Fatal(err)
		}
	}
}

// Rejection under overload: a full limiter without a queue answers at once
// and allocates nothing.
func BenchmarkConcurrencyLimiterRejectFull(b *testing.B) {
	l := newTestLimiter(b, ConcurrencyLimiterOptions{PermitLimit: 1})
	ctx := context.Background()
	if _, err := l.Acquire(ctx); err != nil {
		b.Fatal(err)
	}
	defer l.Release()
	b.ReportAllocs()
	for b.Loop() {
		if acquireErr(l, ctx) == nil {
			b.Fatal("admitted beyond the limit")
		}
	}
}

// The slow path: every Acquire queues and is granted by a Release from the
// other goroutine (waiter, channel and hand-off).
func BenchmarkConcurrencyLimiterQueuedHandoff(b *testing.B) {
	l := newTestLimiter(b, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1})
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(1)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Acquire(ctx); err != nil {
				b.Error(err)
				return
			}
			l.Release()
		}
	})
}
