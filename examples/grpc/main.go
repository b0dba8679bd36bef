// Command grpc is a grpc-go service behind the resilience gRPC adapter:
// one concurrency limit with a priority queue, a per-tenant rate limit and
// a timeout, for unary and streaming calls alike, with rejections as gRPC
// statuses carrying google.rpc.ErrorInfo and RetryInfo details and the
// retry pushback.
//
//	go run ./examples/grpc
//
// The first line on stdout is "listening on HOST:PORT" (the default -addr
// 127.0.0.1:0 picks a free port), then grpcurl lines to try: server
// reflection is registered, and the service's .proto is
// examples/grpc/proto/example/v1/report.proto. SIGINT or SIGTERM shuts it down through
// the middleware's GracefulStop: queued calls and new arrivals are refused
// UNAVAILABLE (reason shutting-down, pushback -1) at once, and running
// calls get up to 5 s to finish.
//
// Methods (google.protobuf well-known types, so no generated code):
//
//   - /example.v1.ReportService/Build (unary, Int64Value ms → StringValue)
//     builds a report for ms milliseconds, stopping if its context ends.
//   - /example.v1.ReportService/Follow (server stream, Int64Value n →
//     StringValue) sends n progress messages, 100 ms apart.
//
// Calls carry x-tenant metadata; each tenant may start -rate calls a
// second. Streams rank below unary calls when they must queue. The
// standard health service (grpc.health.v1.Health) is registered on the
// server directly, outside the middleware, so it answers while the
// service is saturated.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run serves until ctx ends and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("grpc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	permits := fs.Int("permit-limit", 20, "calls running at once")
	queue := fs.Int("queue-limit", 20, "calls waiting for a permit")
	timeout := fs.Duration("timeout", 2*time.Second, "the call's time budget, queue wait included")
	rate := fs.Int("rate", 50, "calls a second per tenant (x-tenant metadata)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	mw, err := resiliencegrpc.New(options(*permits, *queue, *timeout, *rate))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	s := grpc.NewServer()
	mw.Registrar(s).RegisterService(&reportServiceDesc, reports{})
	healthpb.RegisterHealthServer(s, health.NewServer()) // outside the middleware
	reflection.Register(s)                               // outside too: grpcurl lists, describes and calls
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	fmt.Fprint(stdout, tryLines(ln.Addr().String()))
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	select {
	case err := <-served:
		fmt.Fprintln(stderr, err)
		return 1
	case <-ctx.Done():
	}
	grace, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := mw.GracefulStop(grace, s); err != nil {
		fmt.Fprintln(stderr, "shutdown:", err)
	}
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// options is the inbound pipeline: a per-tenant rate limit, a limiter
// whose queue serves unary calls before streams, and a timeout.
func options(permits, queue int, timeout time.Duration, rate int) inbound.Options {
	return inbound.Options{
		Timeout: timeout,
		Concurrency: &resilience.ConcurrencyLimiterOptions{
			PermitLimit: permits, QueueLimit: queue, QueueTimeout: 500 * time.Millisecond,
			Priority: func(ctx context.Context) int {
				if c, ok := resiliencegrpc.CallFrom(ctx); ok && strings.HasSuffix(c.FullMethod, "/Follow") {
					return 1 // streams queue behind unary calls
				}
				return 0
			},
		},
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: rate, Window: time.Second, Key: by.Header("x-tenant")},
	}
}
