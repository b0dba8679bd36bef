package inbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Handler's shortcut for a fixed limiter alone keeps dispatch's rules: a
// panic propagates with its value after the permit is returned, a request
// whose context already ended never reaches the handler, and after Drain
// a free permit admits nobody.
func TestLimiterOnlyFastPathKeepsTheRules(t *testing.T) {
	opts := Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2}}

	t.Run("panic frees the permit", func(t *testing.T) {
		m := mustNew(t, opts)
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
		var got any
		func() {
			defer func() { got = recover() }()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}()
		if got != "boom" {
			t.Fatalf("recovered %v, want the handler's value", got)
		}
		if s := m.Stats(); s.InFlight != 0 {
			t.Fatalf("permit not returned: %+v", s)
		}
	})

	t.Run("ended context is not run", func(t *testing.T) {
		m := mustNew(t, opts)
		ran := false
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		func() {
			defer func() { _ = recover() }() // a gone client's connection is aborted
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil).WithContext(ctx))
		}()
		if ran {
			t.Fatal("the handler ran for a request whose context had ended")
		}
		if s := m.Stats(); s.InFlight != 0 {
			t.Fatalf("permit not returned: %+v", s)
		}
	})

	t.Run("drained", func(t *testing.T) {
		m := mustNew(t, opts)
		if err := m.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		ran := false
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if ran || w.Code != http.StatusServiceUnavailable {
			t.Fatalf("after Drain: ran=%v status %d, want 503 without the handler", ran, w.Code)
		}
	})
}
