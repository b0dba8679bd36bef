package resilienceconnect_test

import (
	"context"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/outbound"
)

// The connect adapter's request view carries the call's headers, so
// by.IsRetry (and RetryPriority) sees a Connect or gRPC retry's
// grpc-previous-rpc-attempts, and outbound.Transport under a connect
// client marks its retries with it.
//
// It uses Connect's GET for a side-effect-free procedure, which the
// transport may repeat; a POST's streaming body cannot be replayed.
func TestConnectSeesMarkedRetries(t *testing.T) {
	var mu sync.Mutex
	var seen []bool
	mw, err := resilienceconnect.New(inbound.Options{
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1000, Window: time.Minute, Key: func(ctx context.Context) string {
			mu.Lock()
			seen = append(seen, by.IsRetry(ctx))
			mu.Unlock()
			return "k"
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	const procedure = "/greet.v1.GreetService/Greet"
	calls := 0
	greet := connect.NewUnaryHandler(procedure, func(_ context.Context, req *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
		if calls++; calls == 1 {
			return nil, connect.NewError(connect.CodeUnavailable, nil)
		}
		return connect.NewResponse(wrapperspb.String("hello")), nil
	}, mw.HandlerOption(), connect.WithIdempotency(connect.IdempotencyNoSideEffects))
	mux := http.NewServeMux()
	mux.Handle(procedure, mw.Handler(greet))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	ro := outbound.RetryOptions()
	ro.Delay, ro.DelayGenerator = 0, nil
	p, err := resilience.NewBuilder[*http.Response]().AddRetry(ro).Build()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := outbound.New(outbound.Options{Base: srv.Client().Transport, Pipeline: p})
	if err != nil {
		t.Fatal(err)
	}
	client := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](&http.Client{Transport: tr}, srv.URL+procedure,
		connect.WithHTTPGet(), connect.WithIdempotency(connect.IdempotencyNoSideEffects)) // a GET: safe to retry
	res, err := client.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("ada")))
	if err != nil || res.Msg.GetValue() != "hello" {
		t.Fatalf("%v %v after %d calls, %v", res, err, calls, seen)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] || !seen[1] {
		t.Fatalf("IsRetry per attempt %v, want [false true]", seen)
	}
}

// A gRPC client through outbound.Transport against the adapter: the
// adapter answers a capacity rejection trailers-only, with
// grpc-retry-pushback-ms; the transport reads it as a handled failure,
// waits the pushback and retries with grpc-previous-rpc-attempts: 1.
func TestGRPCRejectionPushbackIsHonoured(t *testing.T) {
	mw, err := resilienceconnect.New(inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	const procedure = "/greet.v1.GreetService/Greet"
	hold, held := make(chan struct{}), make(chan struct{})
	greet := connect.NewUnaryHandler(procedure, func(_ context.Context, req *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
		if req.Msg.GetValue() == "hold" {
			close(held)
			<-hold
		}
		return connect.NewResponse(wrapperspb.String("hello")), nil
	}, mw.HandlerOption())
	var mu sync.Mutex
	var marks []string
	var at []time.Time
	h := mw.Handler(greet)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		marks = append(marks, r.Header.Get("Grpc-Previous-Rpc-Attempts"))
		at = append(at, time.Now())
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	plain := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](srv.Client(), srv.URL+procedure, connect.WithGRPC())
	holdDone := make(chan struct{})
	go func() {
		defer close(holdDone)
		plain.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("hold"))) //nolint:errcheck
	}()
	<-held
	defer func() { close(hold); <-holdDone }()

	ro := outbound.RetryOptions()
	ro.MaxRetryAttempts = 1
	p, err := resilience.NewBuilder[*http.Response]().AddRetry(ro).Build()
	if err != nil {
		t.Fatal(err)
	}
	// gRPC calls are POSTs; this one is safe to repeat.
	tr, err := outbound.New(outbound.Options{Base: srv.Client().Transport, Pipeline: p, RetryNonIdempotent: true})
	if err != nil {
		t.Fatal(err)
	}
	client := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](&http.Client{Transport: tr}, srv.URL+procedure, connect.WithGRPC())
	_, err = client.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("ada")))
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("got %v, want Unavailable (the permit stays held)", err)
	}
	mu.Lock()
	defer mu.Unlock()
	// marks[0] is the held call.
	if len(marks) != 3 || marks[1] != "" || marks[2] != "1" {
		t.Fatalf("attempts marked %q, want the held call, an unmarked first attempt and a retry marked 1", marks)
	}
	if wait := at[2].Sub(at[1]); wait < resilienceconnect.CapacityRetryAfter {
		t.Fatalf("retried after %v, before the pushback of %v", wait, resilienceconnect.CapacityRetryAfter)
	}
}
