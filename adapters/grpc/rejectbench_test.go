package resiliencegrpc_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// benchmarkRejection measures unary calls the middleware refuses: the
// per-call cost of mapping the refusal to its status and trailers.
func benchmarkRejection(b *testing.B, opts inbound.Options, hold bool) {
	mw, err := resiliencegrpc.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	var ks keepStream
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), &ks)
	unary := mw.UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/s/M"}
	release, entered, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	if hold { // one call keeps the only permit
		go func() {
			defer close(done)
			_, _ = unary(ctx, nil, info, func(context.Context, any) (any, error) { close(entered); <-release; return nil, nil })
		}()
		<-entered
		defer func() { close(release); <-done }()
	} else { // one call spends the only token
		_, _ = unary(ctx, nil, info, func(context.Context, any) (any, error) { return nil, nil })
	}
	refused := func(context.Context, any) (any, error) { b.Error("a refused call ran"); return nil, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := unary(ctx, nil, info, refused); err == nil {
			b.Fatal("a call was admitted: the benchmark must measure rejections")
		}
	}
}

func BenchmarkRejectionCapacity(b *testing.B) {
	benchmarkRejection(b, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, true)
}

func BenchmarkRejectionRateLimited(b *testing.B) {
	benchmarkRejection(b, inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Hour}}, false)
}
