//go:build !race

package inbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	resilience "github.com/ylcnfrht/resilience/core"
)

// A Flow function costs an admitted request nothing: it never runs with a
// permit free, and the request allocates what it allocates without one
// (fixed limiter: nothing; adaptive: its status recorder), through
// Handler, Serve and Execute. (Without the race detector, which allocates
// itself.)
func TestAdmittedFastPathWithFlowAllocatesNothing(t *testing.T) {
	flow := func(context.Context) string {
		t.Error("the flow function ran with a free permit")
		return ""
	}
	w := &nopWriter{h: http.Header{}}
	r := httptest.NewRequest("GET", "/users/7", nil)
	raw := &ginLike{next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	for _, c := range []struct {
		name       string
		opts       Options
		httpAllocs float64
	}{
		{"fixed", Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 10, QueueLimit: 10, Flow: flow}}, 0},
		{"adaptive", Options{Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 10, QueueLimit: 10, Flow: flow}}, 1},
	} {
		m := mustNew(t, c.opts)
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		if n := testing.AllocsPerRun(200, func() { h.ServeHTTP(w, r) }); n != c.httpAllocs {
			t.Errorf("%s: Handler allocates %v per admitted request, want %v", c.name, n, c.httpAllocs)
		}
		if n := testing.AllocsPerRun(200, func() {
			if err := m.serve(w, r, raw, continueGinLike); err != nil {
				t.Fatal(err)
			}
		}); n != c.httpAllocs {
			t.Errorf("%s: Serve allocates %v per admitted request, want %v", c.name, n, c.httpAllocs)
		}
		if n := testing.AllocsPerRun(200, func() { _ = m.execute(context.Background(), raw, nopFn) }); n != 0 {
			t.Errorf("%s: Execute allocates %v per admitted request, want 0", c.name, n)
		}
	}
}

// BenchmarkAdmittedWithFlow is BenchmarkMiddlewareAdmitted's limiter cases
// beside the same limiters with a Flow function, in one run: a request
// that finds a permit free must cost the same (compare each "flow" with
// the case before it). The adaptive limiter's CPU gate is off: on a
// loaded machine it refuses some requests with a permit free, and those
// would measure the gate, not the fast path.
func BenchmarkAdmittedWithFlow(b *testing.B) {
	flow := keyByHeader("X-Tenant")
	for _, bc := range []struct {
		name string
		opts Options
	}{
		{"fixed", Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 100}}},
		{"fixed-flow", Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 100, Flow: flow}}},
		{"adaptive", Options{Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 100, QueueLimit: 100, IgnoreCPUWait: true}}},
		{"adaptive-flow", Options{Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 100, QueueLimit: 100, IgnoreCPUWait: true, Flow: flow}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := mustNew(b, bc.opts).Handler(trivial)
			w := &nopWriter{h: http.Header{}}
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("X-Tenant", "t1")
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
	}
}
