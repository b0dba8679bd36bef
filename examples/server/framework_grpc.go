package main

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// -framework grpc serves the work as the gRPC methods the connect mode
// offers (workProcedure, cooperativeProcedure: Int64Value ms →
// StringValue) on grpc-go's own server behind the gRPC adapter, with the
// standard health service outside it. The address is the one printed
// after "listening on http://"; there are no HTTP routes.
func init() { registerServer("grpc", grpcServerFor) }

// workServer is the work service's implementation type.
type workServer interface{ isWorkServer() }

type workService struct{}

func (workService) isWorkServer() {}

// unaryWork is a unary method of the work service running fn.
func unaryWork(name, fullMethod string, fn func(ctx context.Context, d time.Duration) (string, error)) grpc.MethodDesc {
	return grpc.MethodDesc{MethodName: name, Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.Int64Value)
		if err := dec(in); err != nil {
			return nil, err
		}
		call := func(ctx context.Context, req any) (any, error) {
			ms := req.(*wrapperspb.Int64Value).GetValue()
			if ms < 0 || ms > maxWorkMS {
				return nil, status.Error(codes.InvalidArgument, "ms must be an integer from 0 to 60000")
			}
			out, err := fn(ctx, time.Duration(ms)*time.Millisecond)
			if err != nil {
				return nil, err
			}
			return wrapperspb.String(out), nil
		}
		if interceptor == nil {
			return call(ctx, in)
		}
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}, call)
	}}
}

var workServiceDesc = grpc.ServiceDesc{
	ServiceName: "resilience.example.v1.WorkService",
	HandlerType: (*workServer)(nil),
	Methods: []grpc.MethodDesc{
		// Work ignores its context, like workHandler.
		unaryWork("Work", workProcedure, func(_ context.Context, d time.Duration) (string, error) {
			time.Sleep(d)
			return "worked " + d.String(), nil
		}),
		// Cooperative stops when its context is done.
		unaryWork("Cooperative", cooperativeProcedure, func(ctx context.Context, d time.Duration) (string, error) {
			if err := sleepCtx(ctx, d); err != nil {
				return "", status.Error(codes.DeadlineExceeded, "stopped at the deadline")
			}
			return "worked " + d.String(), nil
		}),
	},
}

// grpcServer is grpc-go's server as the reference server's server:
// Shutdown is GracefulStop bounded by its context (run has drained the
// middleware already), Close is Stop.
type grpcServer struct{ s *grpc.Server }

func (g grpcServer) Serve(ln net.Listener) error {
	err := g.s.Serve(ln)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

func (g grpcServer) Shutdown(ctx context.Context) error {
	done := make(chan struct{})
	go func() { g.s.GracefulStop(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		g.s.Stop()
		return ctx.Err()
	}
}

func (g grpcServer) Close() error { g.s.Stop(); return nil }

func grpcServerFor(cfg config, _ io.Writer) (server, *inbound.Middleware, error) {
	mw, err := resiliencegrpc.New(inboundOptions(cfg))
	if err != nil {
		return nil, nil, asFlagError(err)
	}
	s := grpc.NewServer()
	mw.Registrar(s).RegisterService(&workServiceDesc, workService{})
	healthpb.RegisterHealthServer(s, health.NewServer())
	return grpcServer{s: s}, mw.Inbound(), nil
}

// grpcRouteSummary replaces the HTTP routes of routeSummary.
func grpcRouteSummary(base string) string {
	return "methods (gRPC on " + base[len("http://"):] + "; Int64Value ms → StringValue):\n" +
		"  " + workProcedure + "         sleeps ms ignoring its context\n" +
		"  " + cooperativeProcedure + "  sleeps ms but stops when its context is done\n" +
		"  grpc.health.v1.Health/Check                  outside the middleware: never shed\n" +
		"  metadata x-priority: N                        0 to 9, lower runs sooner when queued\n"
}
