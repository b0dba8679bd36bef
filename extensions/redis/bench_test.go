package resilienceredis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// benchPolicy admits every take of a benchmark: a million a second.
func benchPolicy(alg resilience.RateLimitAlgorithm) resilience.RateLimitPolicy {
	return resilience.RateLimitPolicy{Name: "bench", Algorithm: alg, Limit: 1_000_000, Window: time.Second}
}

// BenchmarkTake is one decision against a local redis-server (loopback, one
// round trip), per algorithm; BenchmarkTake/memory is the in-memory store's
// for comparison.
func BenchmarkTake(b *testing.B) {
	srv := startRedis(b)
	store, err := New(Options{Client: srv.Client(), Budget: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("memory", func(b *testing.B) {
		mem := resilience.NewMemoryRateLimitStore(0)
		p := benchPolicy(resilience.FixedWindow)
		for b.Loop() {
			if _, err := mem.Take(ctx, "k", p); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, alg := range []resilience.RateLimitAlgorithm{resilience.FixedWindow, resilience.SlidingWindow, resilience.TokenBucket} {
		b.Run(string(alg), func(b *testing.B) {
			p := benchPolicy(alg)
			b.ReportAllocs()
			for b.Loop() {
				if d, err := store.Take(ctx, "k", p); err != nil || !d.Allowed {
					b.Fatal(d, err)
				}
			}
		})
	}
}

// BenchmarkMiddleware is the inbound middleware around an empty handler
// (no network between client and middleware): without a rate limit, with
// the in-memory store and with the Redis store, so the differences are the
// cost of a rate-limit decision in each.
func BenchmarkMiddleware(b *testing.B) {
	srv := startRedis(b)
	store, err := New(Options{Client: srv.Client(), Budget: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	rl := func(s resilience.RateLimitStore) *resilience.RateLimiterOptions {
		return &resilience.RateLimiterOptions{Name: "bench", PermitLimit: 1_000_000, Window: time.Second, Store: s}
	}
	for _, c := range []struct {
		name string
		opts inbound.Options
	}{
		{"none", inbound.Options{}},
		{"memory", inbound.Options{RateLimit: rl(nil)}},
		{"redis", inbound.Options{RateLimit: rl(store)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			m, err := inbound.New(c.opts)
			if err != nil {
				b.Fatal(err)
			}
			h := m.Handler(ok)
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusNoContent {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
