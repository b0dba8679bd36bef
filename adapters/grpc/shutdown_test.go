package resiliencegrpc_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestGracefulStop: a queued call is answered UNAVAILABLE shutting-down as
// soon as GracefulStop begins, while the running one finishes; then
// GracefulStop returns.
func TestGracefulStop(t *testing.T) {
	g := make(gate)
	svc, entered := holdOne(g)
	s := start(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Hour}}, svc, viaRegistrar)
	defer g.open()
	running := s.callUnary(context.Background())
	receive(t, "running call in its handler", entered)
	queued := s.callUnary(context.Background())
	s.waitStats("one queued", func(st inbound.Stats) bool { return st.Queued == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- s.mw.GracefulStop(ctx, s.srv) }()
	checkRejection(t, receive(t, "queued call", queued), codes.Unavailable, inbound.CodeBulkheadFull, string(resilience.ReasonShuttingDown), 0, "-1")
	select {
	case err := <-stopped:
		t.Fatalf("GracefulStop returned %v with a call running", err)
	default:
	}
	g.open()
	if r := receive(t, "running call", running); r.err != nil {
		t.Fatalf("running call: %v, want it to finish", r.err)
	}
	if err := receive(t, "GracefulStop", stopped); err != nil {
		t.Fatalf("GracefulStop: %v", err)
	}
}

// TestGracefulStopBounded: when the grace period ends first, GracefulStop
// stops the server and returns the context's error.
func TestGracefulStopBounded(t *testing.T) {
	g := make(gate)
	svc, entered := holdOne(g)
	s := start(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, svc, viaRegistrar)
	running := s.callUnary(context.Background())
	receive(t, "running call in its handler", entered)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.mw.GracefulStop(ctx, s.srv); err != context.DeadlineExceeded {
		t.Fatalf("GracefulStop: %v, want the context's DeadlineExceeded", err)
	}
	g.open()
	receive(t, "running call", running)
}
