package grpcinterop

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// The grpc-go adapter as a target: it answers a handler's deadline with a
// trailers-only response (one HEADERS frame), and its rejections carry
// retry-after and the RateLimit fields as connect's do.
func init() {
	targets = append(targets, target{name: "grpc", serve: serveGRPC, deadlineFrames: 1, httpFields: true,
		callerDeadline: "grpc-go's transport owns the caller's grpc-timeout: it resets the stream at that deadline and answers a call that arrives expired itself"})
}

// serveGRPC serves method on grpc-go behind resiliencegrpc's Registrar.
func serveGRPC(t *testing.T, opts inbound.Options, handle func(context.Context) error) server {
	t.Helper()
	mw, err := resiliencegrpc.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	mw.Registrar(srv).RegisterService(&grpc.ServiceDesc{
		ServiceName: "interop.v1.Interop",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, _ any) (any, error) { return &emptypb.Empty{}, handle(ctx) }
			if ic == nil {
				return h(ctx, in)
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: method}, h)
		}}},
	}, nil)
	addr := listen(t, func(ln net.Listener) error {
		err := srv.Serve(ln)
		if errors.Is(err, grpc.ErrServerStopped) {
			return nil
		}
		return err
	})
	t.Cleanup(srv.Stop)
	drain := func() {
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		_ = mw.Inbound().Drain(ended) // marks it draining; in flight may stay
	}
	return server{addr: addr, drain: drain, queued: func() int { return mw.Stats().Queued }}
}
