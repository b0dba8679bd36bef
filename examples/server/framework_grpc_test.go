package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Invariant: -framework grpc serves the work methods on grpc-go behind the
// gRPC adapter: in time a call succeeds, past -timeout it is
// DEADLINE_EXCEEDED though Work ignores its context, over capacity it is
// UNAVAILABLE with ErrorInfo reason full, the health service is never
// shed, and the program shuts down cleanly.
func TestFrameworkGRPC(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"-framework", "grpc", "-permit-limit", "1", "-queue-limit", "0", "-timeout", "300ms"}, &stdout, &stderr)
	}()
	m := grpcListeningLine.FindStringSubmatch(firstLine(t, &stdout, exited))
	if m == nil {
		t.Fatalf("first line does not match %v:\n%s", grpcListeningLine, stdout.String())
	}
	conn, call := cooperativeThenLateWork(t, ctx, m[1])
	// The late Work holds the only permit until it returns.
	err := call(cooperativeProcedure, 1)
	st, _ := status.FromError(err)
	var reason string
	for _, d := range st.Details() {
		if v, ok := d.(*errdetails.ErrorInfo); ok {
			reason = v.Metadata["reason"]
		}
	}
	if st.Code() != codes.Unavailable || reason != "full" {
		t.Fatalf("call beside the late Work: %v, want UNAVAILABLE reason full", err)
	}
	if h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health while saturated: %v %v", h, err)
	}
	cancel()
	expectCleanExit(t, exited, &stderr, "")
}

// Invariant: at shutdown -framework grpc fails its health service at
// once, with /readyz's place in the order (before -ready-delay): Check
// answers NOT_SERVING and an open Watch is sent NOT_SERVING; then the
// Watch stream ends (UNAVAILABLE) so GracefulStop does not wait for it,
// and the program exits 0 within its grace (a Watch left open held
// GracefulStop for the whole grace, then Stop cut it: exit 1).
func TestFrameworkGRPCShutdownFailsHealthAndEndsWatches(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"-framework", "grpc", "-ready-delay", "200ms"}, &stdout, &stderr)
	}()
	m := grpcListeningLine.FindStringSubmatch(firstLine(t, &stdout, exited))
	if m == nil {
		t.Fatalf("first line does not match %v:\n%s", grpcListeningLine, stdout.String())
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	watch, err := hc.Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch before the shutdown: %v %v, want SERVING", r, err)
	}

	cancel() // the shutdown signal
	if r, err := watch.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch at the shutdown: %v %v, want NOT_SERVING", r, err)
	}
	// run prints this line once health has failed, before -ready-delay.
	deadline := time.Now().Add(waitBound)
	for !strings.Contains(stdout.String(), "shutting down:") {
		if time.Now().After(deadline) {
			t.Fatalf("no shutdown line:\n%s", stdout.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if h, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{}); err == nil && h.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Check once the shutdown began: %v, want NOT_SERVING", h.Status)
	}
	if r, err := watch.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Watch at GracefulStop: %v %v, want the stream ended UNAVAILABLE", r, err)
	}
	expectCleanExit(t, exited, &stderr, " (GracefulStop within its grace)")
}

// cooperativeThenLateWork dials the server's gRPC address and makes two
// calls: a Cooperative one that succeeds and a Work of 2 s that its
// -timeout ends with DEADLINE_EXCEEDED, its handler running on late. It
// returns the connection and the call function, for more.
func cooperativeThenLateWork(t *testing.T, ctx context.Context, addr string) (*grpc.ClientConn, func(method string, ms int64) error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	call := func(method string, ms int64) error {
		return conn.Invoke(ctx, method, wrapperspb.Int64(ms), new(wrapperspb.StringValue))
	}
	if err := call(cooperativeProcedure, 1); err != nil {
		t.Fatalf("Cooperative: %v", err)
	}
	if err := call(workProcedure, 2000); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Work past -timeout: %v, want DEADLINE_EXCEEDED", err)
	}
	return conn, call
}
