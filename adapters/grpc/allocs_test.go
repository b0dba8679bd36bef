package resiliencegrpc_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/budget"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/throttle"
)

// TestAdmittedCallAllocatesNothing: with the concurrency limiter and no
// timeout, an admitted call through the unary interceptor, the
// registrar's method handler or the stream interceptor allocates nothing
// of its own (the pooled call state and its bound callback).
func TestAdmittedCallAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under the race detector")
	}
	mw, err := resiliencegrpc.New(inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 8}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	unary := mw.UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/s/M"}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	if n := testing.AllocsPerRun(500, func() { _, _ = unary(ctx, nil, info, handler) }); n != 0 {
		t.Errorf("UnaryInterceptor allocates %v per admitted call, want 0", n)
	}

	var desc = grpc.ServiceDesc{ServiceName: "s", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{{MethodName: "M",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			return nil, dec(nil)
		}}},
		Streams: []grpc.StreamDesc{{StreamName: "S", Handler: func(any, grpc.ServerStream) error { return nil }}}}
	var reg captureRegistrar
	mw.Registrar(&reg).RegisterService(&desc, nil)
	dec := func(any) error { return nil }
	method := reg.desc.Methods[0].Handler
	if n := testing.AllocsPerRun(500, func() { _, _ = method(nil, ctx, dec, nil) }); n != 0 {
		t.Errorf("Registrar's method handler allocates %v per admitted call, want 0", n)
	}
	stream := mw.StreamInterceptor()
	var ss grpc.ServerStream = fakeStream{ctx: ctx}
	sinfo := &grpc.StreamServerInfo{FullMethod: "/s/S"}
	sh := func(any, grpc.ServerStream) error { return nil }
	if n := testing.AllocsPerRun(500, func() { _ = stream(nil, ss, sinfo, sh) }); n != 0 {
		t.Errorf("StreamInterceptor allocates %v per admitted stream, want 0", n)
	}
}

type captureRegistrar struct{ desc *grpc.ServiceDesc }

func (r *captureRegistrar) RegisterService(desc *grpc.ServiceDesc, _ any) { r.desc = desc }

// fakeStream is a ServerStream with only a context.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fakeStream) Context() context.Context { return s.ctx }

// keepStream is a ServerTransportStream that keeps what it is given
// without copying (grpc-go's own joins the metadata), so an allocation
// count is the adapter's alone.
type keepStream struct{ header, trailer metadata.MD }

func (*keepStream) Method() string                    { return "/s/M" }
func (s *keepStream) SetHeader(md metadata.MD) error  { s.header = md; return nil }
func (s *keepStream) SendHeader(md metadata.MD) error { s.header = md; return nil }
func (s *keepStream) SetTrailer(md metadata.MD) error { s.trailer = md; return nil }

// TestCapacityRejectionAllocatesNothing: a call refused with the limiter
// full costs the adapter no allocation: status, error and trailers
// (retry-after and the pushback included) are rendered once per
// middleware.
func TestCapacityRejectionAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under the race detector")
	}
	mw, err := resiliencegrpc.New(inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var ks keepStream
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), &ks)
	unary := mw.UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/s/M"}
	release, entered, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _ = unary(ctx, nil, info, func(context.Context, any) (any, error) { close(entered); <-release; return nil, nil })
	}()
	<-entered
	defer func() { close(release); <-done }()
	refused := func(context.Context, any) (any, error) { t.Error("a refused call ran"); return nil, nil }
	if n := testing.AllocsPerRun(500, func() { _, _ = unary(ctx, nil, info, refused) }); n != 0 {
		t.Errorf("a capacity rejection allocates %v, want 0", n)
	}
	if got := ks.trailer.Get("retry-after"); len(got) != 1 || got[0] != "1" {
		t.Errorf("trailer %v, want retry-after 1", ks.trailer)
	}
}

// TestClientCallAllocations: a unary call that succeeds at once
// allocates nothing of the Client's own (its call state, callback and
// header and trailer options are pooled); what is left is the
// pipeline's, at most one per strategy (the retry, and the throttle).
func TestClientCallAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under the race detector")
	}
	b, err := budget.New(budget.Options{})
	if err != nil {
		t.Fatal(err)
	}
	th, err := throttle.New(throttle.Options[any]{})
	if err != nil {
		t.Fatal(err)
	}
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts resiliencegrpc.ClientOptions
		max  float64
	}{
		{"retry", resiliencegrpc.ClientOptions{}, 1},
		{"retry, budget and throttle", resiliencegrpc.ClientOptions{Budget: b, Throttle: th}, 2},
	} {
		c, err := resiliencegrpc.NewClient(tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		unary := c.UnaryInterceptor()
		if n := testing.AllocsPerRun(500, func() { _ = unary(ctx, "/s/M", nil, nil, nil, invoker) }); n > tc.max {
			t.Errorf("%s: %v allocations per call, want at most %v", tc.name, n, tc.max)
		}
	}
}

// BenchmarkClientUnaryInterceptor is the Client's cost on a call that
// succeeds at once, without the network: the retry, the budget and the
// throttle around a no-op invoker.
func BenchmarkClientUnaryInterceptor(b *testing.B) {
	bud, _ := budget.New(budget.Options{})
	th, _ := throttle.New(throttle.Options[any]{})
	c, err := resiliencegrpc.NewClient(resiliencegrpc.ClientOptions{Budget: bud, Throttle: th})
	if err != nil {
		b.Fatal(err)
	}
	unary := c.UnaryInterceptor()
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = unary(ctx, "/s/M", nil, nil, nil, invoker)
		}
	})
}
