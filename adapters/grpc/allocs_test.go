package resiliencegrpc_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
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
