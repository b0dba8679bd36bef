package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// -framework grpc serves the work as the gRPC methods the connect mode
// offers (workProcedure, cooperativeProcedure: Int64Value ms →
// StringValue, defined in proto/resilience/example/v1/work.proto) on
// grpc-go's own server behind the gRPC adapter, with the standard health
// service and server reflection outside it. The address is the one
// printed after "listening on " (HOST:PORT, plaintext); there are no HTTP
// routes.
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
// failHealth sets the health service NOT_SERVING when the shutdown starts
// (run calls it with /readyz failing, before -ready-delay), Shutdown ends
// the open health Watch streams and is GracefulStop bounded by its
// context (run has drained the middleware already), Close is Stop.
type grpcServer struct {
	s        *grpc.Server
	health   *health.Server
	stopping context.Context    // ends when Shutdown starts: Watch streams return
	stop     context.CancelFunc // ends stopping
}

func (g grpcServer) Serve(ln net.Listener) error {
	err := g.s.Serve(ln)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// failHealth sets every service NOT_SERVING, for good: Check answers it,
// and each open Watch stream is sent it, so clients and balancers stop
// choosing this server while it still serves.
func (g grpcServer) failHealth() { g.health.Shutdown() }

func (g grpcServer) Shutdown(ctx context.Context) error {
	g.failHealth() // in case run did not
	// GracefulStop waits for every open stream, a health Watch too, and a
	// watcher never ends its own: end them first.
	g.stop()
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

func (g grpcServer) Close() error { g.stop(); g.s.Stop(); return nil }

func grpcServerFor(cfg config, _ io.Writer) (server, *inbound.Middleware, error) {
	mw, err := resiliencegrpc.New(inboundOptions(cfg))
	if err != nil {
		return nil, nil, asFlagError(err)
	}
	s := grpc.NewServer()
	mw.Registrar(s).RegisterService(&workServiceDesc, workService{})
	g := grpcServer{s: s, health: health.NewServer()}
	g.stopping, g.stop = context.WithCancel(context.Background())
	healthpb.RegisterHealthServer(s, endingWatches{Server: g.health, stopping: g.stopping})
	// Reflection (outside the middleware, like health: never shed) lets
	// grpcurl and other tools list, describe and call the work service
	// without a copy of work.proto.
	reflection.Register(s)
	return g, mw.Inbound(), nil
}

// endingWatches is grpc-go's health service whose Watch streams end when
// stopping does. grpc-go's own keeps a Watch open until its client leaves,
// after Shutdown too (it sends NOT_SERVING and waits), and GracefulStop
// waits for every open stream: one watcher would hold the stop for the
// whole grace period, then be cut by Stop with everything else.
type endingWatches struct {
	*health.Server
	stopping context.Context
}

// Watch is the health service's, on a stream whose context also ends with
// stopping; a stream ended that way returns UNAVAILABLE, as a call to a
// server going away does, and the client's health check moves on.
func (h endingWatches) Watch(in *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer context.AfterFunc(h.stopping, cancel)()
	err := h.Server.Watch(in, watchStream{stream, ctx})
	if h.stopping.Err() != nil && stream.Context().Err() == nil {
		return status.Error(codes.Unavailable, "the server is stopping")
	}
	return err
}

// watchStream is a Watch stream with a context of its own.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (w watchStream) Context() context.Context { return w.ctx }

// grpcRouteSummary replaces the HTTP routes of routeSummary, with
// grpcurl lines that work as printed (addr is HOST:PORT; the line with
// -proto, from the repository root).
func grpcRouteSummary(cfg config, addr string) string {
	work, coop := workProcedure[1:], cooperativeProcedure[1:] // grpcurl names a method without the leading slash
	late := min(cfg.timeout.Milliseconds()+1000, maxWorkMS)
	row := func(name, what string) string { return fmt.Sprintf("  %-47s %s\n", name, what) }
	return "methods (gRPC on " + addr + ", plaintext; Int64Value ms → StringValue; proto: examples/server/proto/" + workProtoFile + "):\n" +
		row(workProcedure, "sleeps ms ignoring its context") +
		row(cooperativeProcedure, "sleeps ms but stops when its context is done") +
		row("/grpc.health.v1.Health/Check", "outside the middleware: never shed") +
		row("server reflection", "outside the middleware: grpcurl needs no .proto") +
		row("metadata x-priority: N", "0 to 9, lower runs sooner when queued") +
		"\n" +
		"try (grpcurl: go install github.com/fullstorydev/grpcurl/cmd/grpcurl@" + grpcurlVersion + "; in JSON an Int64Value is the bare number):\n" +
		"  grpcurl -plaintext " + addr + " list\n" +
		"  grpcurl -plaintext " + addr + " describe resilience.example.v1.WorkService\n" +
		"  grpcurl -plaintext -d 200 " + addr + " " + work + "\n" +
		"  grpcurl -plaintext -H 'x-priority: 0' -d 200 " + addr + " " + coop + "\n" +
		"  grpcurl -plaintext " + addr + " grpc.health.v1.Health/Check\n" +
		"  # without reflection, from the repository root:\n" +
		"  grpcurl -plaintext -import-path examples/server/proto -proto " + workProtoFile + " -d 200 " + addr + " " + work + "\n" +
		"  # overload: go run ./examples/overload (a load lab: the same limiters, measured)\n" +
		fmt.Sprintf("  # past -timeout (%v) the client gets DEADLINE_EXCEEDED on time, though Work keeps going\n", cfg.timeout) +
		fmt.Sprintf("  grpcurl -plaintext -d %d %s %s\n", late, addr, work)
}

// grpcurlVersion is the grpcurl release the printed lines are tested with
// (.ci/run installs it).
const grpcurlVersion = "v1.9.4"
