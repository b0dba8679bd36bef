package outbound_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/outbound"
)

func ExampleNew() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "fresh data")
	}))
	defer srv.Close()

	cb, _ := resilience.NewCircuitBreaker(outbound.CircuitBreakerOptions())
	p, err := resilience.NewBuilder[*http.Response](resilience.WithName("catalog")).
		AddRetry(outbound.RetryOptions()).
		AddResultStrategy(cb).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	t, _ := outbound.New(outbound.Options{Base: base, Pipeline: p})
	client := &http.Client{Transport: t}

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", calls.Load(), "calls")
	// Output: 200 fresh data after 2 calls
}
