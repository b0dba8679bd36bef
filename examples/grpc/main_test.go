package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun: the program serves Build and Follow, refuses a tenant over its
// rate with RESOURCE_EXHAUSTED (ErrorInfo RATE_LIMITED) while another goes
// on, answers a call past -timeout with DEADLINE_EXCEEDED, keeps the
// health service outside the middleware, and shuts down cleanly.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, []string{"-rate", "3", "-timeout", "200ms"}, pw, io.Discard); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr) //nolint:errcheck // drain
	addr := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	build := func(tenant string, ms int64) error {
		out := new(wrapperspb.StringValue)
		return conn.Invoke(metadata.AppendToOutgoingContext(ctx, "x-tenant", tenant), buildMethod, wrapperspb.Int64(ms), out)
	}
	for i := range 3 {
		if err := build("acme", 1); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	err = build("acme", 1)
	st, _ := status.FromError(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("fourth call: %v, want RESOURCE_EXHAUSTED", err)
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if v, ok := d.(*errdetails.ErrorInfo); ok {
			info = v
		}
	}
	if info == nil || info.Reason != "RATE_LIMITED" {
		t.Errorf("details %v, want ErrorInfo RATE_LIMITED", st.Details())
	}
	if err := build("globex", 1); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	if err := build("initech", 5000); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("call past -timeout: %v, want DEADLINE_EXCEEDED", err)
	}

	stream, err := conn.NewStream(metadata.AppendToOutgoingContext(ctx, "x-tenant", "hooli"), &grpc.StreamDesc{ServerStreams: true}, followMethod)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(wrapperspb.Int64(2)); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var got int
	for {
		msg := new(wrapperspb.StringValue)
		err := stream.RecvMsg(msg)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Follow: %v", err)
		}
		got++
	}
	if got != 2 {
		t.Errorf("Follow sent %d messages, want 2", got)
	}

	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}

	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit status %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit after cancel")
	}
}
