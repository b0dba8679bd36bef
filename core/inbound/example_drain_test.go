package inbound_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// At shutdown, Drain comes before http.Server.Shutdown, under the same
// grace period: from then on queued requests and new arrivals get a 503
// at once, with Connection: close so kept-alive clients reconnect
// elsewhere, and Drain returns when the running handlers have finished.
func ExampleMiddleware_Drain() {
	m, err := inbound.New(inbound.Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 50},
	})
	if err != nil {
		panic(err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	// On SIGTERM: the grace period, Drain, then srv.Shutdown(ctx).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println("drain:", m.Drain(ctx)) // nothing in flight: returns at once

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	fmt.Println(w.Code, "Connection:", w.Header().Get("Connection"))
	fmt.Println(w.Body)
	// Output:
	// drain: <nil>
	// 503 Connection: close
	// {"statusCode":503,"error":"Service Unavailable","message":"The server is shutting down; retry later.","code":"BULKHEAD_FULL","reason":"shutting-down"}
}
