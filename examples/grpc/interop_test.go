package main

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// The adapter beside otelgrpc (a stats handler, so it sees every call,
// shed ones included) and go-grpc-middleware's interceptors. These tests
// live in the examples module so that neither enters the adapter's
// go.mod.

// holdingReports is the report service whose Build waits for gate.
type holdingReports struct {
	reports
	entered chan struct{}
	gate    chan struct{}
}

func (h holdingReports) Build(ctx context.Context, ms *wrapperspb.Int64Value) (*wrapperspb.StringValue, error) {
	h.entered <- struct{}{}
	<-h.gate
	return wrapperspb.String("built"), nil
}

// countLogger counts the calls go-grpc-middleware's logging interceptor
// reports as finished.
type countLogger struct{ finished atomic.Int64 }

func (c *countLogger) Log(_ context.Context, _ logging.Level, msg string, _ ...any) {
	if msg == "finished call" {
		c.finished.Add(1)
	}
}

// TestCoexistsWithOtelgrpcAndMiddlewareChain: with otelgrpc's stats
// handlers on both sides and go-grpc-middleware's recovery and logging
// interceptors chained on the server, a call shed by the registrar still
// gets its span (status Error, the UNAVAILABLE code) and its details, but
// never reaches the interceptor chain; the admitted call runs through the
// chain; and the adapter placed inside the chain as an interceptor sheds
// the same way.
func TestCoexistsWithOtelgrpcAndMiddlewareChain(t *testing.T) {
	for _, inChain := range []bool{false, true} {
		name := "registrar"
		if inChain {
			name = "in-the-chain"
		}
		t.Run(name, func(t *testing.T) {
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			defer tp.Shutdown(context.Background()) //nolint:errcheck // in-memory

			mw, err := resiliencegrpc.New(inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
			if err != nil {
				t.Fatal(err)
			}
			var logs countLogger
			chain := []grpc.UnaryServerInterceptor{recovery.UnaryServerInterceptor(), logging.UnaryServerInterceptor(&logs)}
			if inChain {
				chain = append(chain, mw.UnaryInterceptor())
			}
			s := grpc.NewServer(grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp))), grpc.ChainUnaryInterceptor(chain...))
			impl := holdingReports{entered: make(chan struct{}, 2), gate: make(chan struct{})}
			if inChain {
				s.RegisterService(&reportServiceDesc, impl)
			} else {
				mw.Registrar(s).RegisterService(&reportServiceDesc, impl)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = s.Serve(ln) }()
			defer s.Stop()
			conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp))))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()

			var wg sync.WaitGroup
			wg.Add(1)
			var heldErr error
			go func() {
				defer wg.Done()
				heldErr = conn.Invoke(context.Background(), buildMethod, wrapperspb.Int64(1), new(wrapperspb.StringValue))
			}()
			select {
			case <-impl.entered:
			case <-time.After(20 * time.Second):
				t.Fatal("held call never reached its handler")
			}
			err = conn.Invoke(context.Background(), buildMethod, wrapperspb.Int64(1), new(wrapperspb.StringValue))
			st, _ := status.FromError(err)
			if st.Code() != codes.Unavailable || len(st.Details()) == 0 {
				t.Fatalf("shed call: %v (details %v), want UNAVAILABLE with details", err, st.Details())
			}
			close(impl.gate)
			wg.Wait()
			if heldErr != nil {
				t.Fatalf("held call: %v", heldErr)
			}
			want := int64(1) // only the admitted call passes the chain
			if inChain {
				want = 2 // the chain's logging runs before the adapter
			}
			if n := logs.finished.Load(); n != want {
				t.Errorf("logging interceptor saw %d calls, want %d", n, want)
			}
			// Server and client spans: two per call, the shed call's server
			// span with an error status (the adapter's refusal reaches the
			// stats handler as the call's status). The client span's status
			// is otelgrpc's client handler's alone, and under load it
			// sometimes ends the shed call's span Unset although Invoke
			// returned UNAVAILABLE (seen at 0594d96 as well, 3 of 450 runs
			// with two other copies running): it is not asserted.
			// The server ends its span as it sends the status: wait for it.
			for end := time.Now().Add(10 * time.Second); len(spans.Ended()) < 4 && time.Now().Before(end); {
				time.Sleep(2 * time.Millisecond)
			}
			var serverErrors, clients int
			for _, sp := range spans.Ended() {
				switch sp.SpanKind() {
				case oteltrace.SpanKindServer:
					if sp.Status().Code == otelcodes.Error {
						serverErrors++
					}
				case oteltrace.SpanKindClient:
					clients++
				}
			}
			if n := len(spans.Ended()); n != 4 || serverErrors != 1 || clients != 2 {
				t.Errorf("%d spans, %d server spans with an error status, %d client spans; want 4, 1 (the shed call's) and 2", n, serverErrors, clients)
			}
		})
	}
}
