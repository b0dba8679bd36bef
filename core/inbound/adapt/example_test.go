package adapt_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// tinyRequest is the request object of a framework not built on net/http.
type tinyRequest struct {
	Method, Path, Pattern, Peer string
	Header                      http.Header
	Status                      int
	Body                        string
}

// An adapter for a framework not built on net/http: describe the framework
// once, run each request through Execute with the framework's own object,
// and render a rejection through the framework's response.
func ExampleKit_Execute() {
	m, err := adapt.New(adapt.Framework{
		View: func(raw any, v *inbound.Request) {
			r := raw.(*tinyRequest)
			v.Method, v.Path, v.RemoteAddr, v.Header = r.Method, r.Path, r.Peer, r.Header
		},
		Route: func(raw any) string { return adapt.ColonRoute(raw.(*tinyRequest).Pattern) },
	}, inbound.Options{
		Timeout: 5 * time.Second,
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Minute, Key: func(ctx context.Context) string {
			r, _ := inbound.RequestFrom(ctx)
			return r.Route() // one quota per route
		}},
	})
	if err != nil {
		panic(err)
	}
	serve := func(r *tinyRequest, handler func(ctx context.Context, r *tinyRequest) error) {
		err := m.Execute(context.Background(), r, func(ctx context.Context) error { return handler(ctx, r) })
		if err != nil {
			if resp, ok := m.Render(err); ok { // false: the client left
				r.Status, r.Body = resp.Status, string(resp.Body)
			}
		}
	}
	hello := func(_ context.Context, r *tinyRequest) error {
		r.Status, r.Body = 200, "hello"
		return nil
	}
	for range 2 {
		r := &tinyRequest{Method: "GET", Path: "/users/7", Pattern: "/users/:id", Peer: "192.0.2.1:4000"}
		serve(r, hello)
		fmt.Println(r.Status, r.Body)
	}
	// Output:
	// 200 hello
	// 429 {"statusCode":429,"error":"Too Many Requests","message":"Too many requests; retry after the time in Retry-After.","code":"RATE_LIMITED"}
}
