package resilienceconnect_test

import (
	"context"
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
// inbound.IsRetry (and RetryPriority) sees a Connect or gRPC retry's
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
			seen = append(seen, inbound.IsRetry(ctx))
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
