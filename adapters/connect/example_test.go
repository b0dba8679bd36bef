package resilienceconnect_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// A rate limit per procedure and tenant: the key function reads the call
// through CallFrom. The third call is refused with ResourceExhausted, its
// retry advice in the error's metadata.
func Example() {
	mw, err := resilienceconnect.New(inbound.Options{
		Timeout:     5 * time.Second,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 50, QueueTimeout: 500 * time.Millisecond},
		RateLimit: &resilience.RateLimiterOptions{
			PermitLimit: 2,
			Window:      time.Minute,
			Key: func(ctx context.Context) string {
				c, _ := resilienceconnect.CallFrom(ctx)
				return c.Procedure + " " + c.Header.Get("X-Tenant")
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	const procedure = "/greet.v1.GreetService/Greet"
	greet := connect.NewUnaryHandler(procedure, func(_ context.Context, req *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
		return connect.NewResponse(wrapperspb.String("hello " + req.Msg.GetValue())), nil
	}, mw.HandlerOption())
	mux := http.NewServeMux()
	mux.Handle(procedure, mw.Handler(greet))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	client := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](srv.Client(), srv.URL+procedure)
	for range 3 {
		req := connect.NewRequest(wrapperspb.String("ada"))
		req.Header().Set("X-Tenant", "acme")
		res, err := client.CallUnary(context.Background(), req)
		var ce *connect.Error
		if errors.As(err, &ce) {
			fmt.Println(ce.Code(), "retry after", ce.Meta().Get("Retry-After"), "s")
			continue
		}
		fmt.Println(res.Msg.GetValue())
	}
	// Output:
	// hello ada
	// hello ada
	// resource_exhausted retry after 60 s
}

// Invalid options are reported when the middleware is built, naming the
// field.
func ExampleNew_invalid() {
	_, err := resilienceconnect.New(inbound.Options{Timeout: -time.Second})
	fmt.Println(err)
	// Output:
	// resilience: invalid option Options.Timeout: must be between 0 (no timeout) and 876000h0m0s, got -1s
}
