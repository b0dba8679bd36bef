package inbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	resilience "github.com/ylcnfrht/resilience/core"
)

// The shortcut for a fixed limiter alone, in Handler and in Serve, keeps
// dispatch's rules: a panic propagates with its value after the permit is
// returned, a request whose context already ended never reaches the
// handler, and after Drain a free permit admits nobody.
func TestLimiterOnlyFastPathKeepsTheRules(t *testing.T) {
	opts := Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2}}
	entries := []struct {
		name string
		wrap func(m *Middleware, h http.Handler) http.Handler
	}{
		{"Handler", (*Middleware).Handler},
		{"Serve", serveAsHandler},
	}
	for _, e := range entries {
		t.Run(e.name, func(t *testing.T) { testFastPathRules(t, opts, e.wrap) })
	}
}

// serveAsHandler is h behind Serve, the way an adapter of a framework on
// net/http uses it: a rejection rendered with RenderServe, a gone client's
// connection aborted.
func serveAsHandler(m *Middleware, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := m.serve(w, r, nil, func(w http.ResponseWriter, r *http.Request, _ any) { h.ServeHTTP(w, r) })
		if err == nil {
			return
		}
		resp, ok := m.renderServe(w, r, err)
		if !ok {
			panic(http.ErrAbortHandler)
		}
		writeResponse(w, resp)
	})
}

func testFastPathRules(t *testing.T, opts Options, wrap func(*Middleware, http.Handler) http.Handler) {
	t.Run("panic frees the permit", func(t *testing.T) {
		m := mustNew(t, opts)
		h := wrap(m, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
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
		h := wrap(m, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
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
		h := wrap(m, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if ran || w.Code != http.StatusServiceUnavailable {
			t.Fatalf("after Drain: ran=%v status %d, want 503 without the handler", ran, w.Code)
		}
	})
}
