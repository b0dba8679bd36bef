package inbound_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// Wrap a handler with a timeout and a concurrency cap; the second request
// finds the only permit taken and is shed with a 503.
func Example() {
	m, err := inbound.New(inbound.Options{
		Timeout:     5 * time.Second,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
	})
	if err != nil {
		panic(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	})
	mux := http.NewServeMux()
	mux.Handle("/", m.Handler(hello))
	mux.Handle("/debug/limits", m.StatsHandler())

	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	fmt.Print(w.Code, " ", w.Body)

	held, _ := m.Limiter().TryAcquire() // someone else holds the only permit
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	fmt.Println(w.Code, w.Body)

	w = httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/debug/limits", nil))
	fmt.Print(w.Body)
	held.Release()
	// Output:
	// 200 hello
	// 503 {"statusCode":503,"error":"Service Unavailable","message":"The server is at capacity; retry later.","code":"BULKHEAD_FULL","reason":"full"}
	// {"limit":1,"inflight":1,"queued":0,"late":0,"lateTotal":0,"admitted":1,"timedOut":0,"rateLimited":0,"storeUnavailable":0,"full":1,"queueTimeout":0,"dropped":0,"shuttingDown":0,"canceled":0,"panicked":0,"requests":2}
}
