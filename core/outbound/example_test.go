package outbound_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

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

// A hung first attempt is cut off by AttemptTimeout and retried; the
// second answers.
func ExampleOptions_attemptTimeout() {
	var calls atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			select { // hangs until the client gives up on this attempt
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	defer close(release) // before Close, which waits for the handlers

	retry := outbound.RetryOptions()
	retry.Delay = 0 // retry at once, for the example
	p, err := resilience.NewBuilder[*http.Response]().AddRetry(retry).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	t, _ := outbound.New(outbound.Options{Base: base, Pipeline: p, AttemptTimeout: 100 * time.Millisecond})
	resp, err := (&http.Client{Transport: t}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", calls.Load(), "calls")
	// Output: 200 ok after 2 calls
}
