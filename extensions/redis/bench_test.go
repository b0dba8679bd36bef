package resilienceredis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// benchPolicy admits every take of a benchmark: a million a second.
func benchPolicy(alg ratelimit.Algorithm) ratelimit.Policy {
	return ratelimit.Policy{Name: "bench", Algorithm: alg, Limit: 1_000_000, Window: time.Second}
}

// benchStore is a store on its own client of srv.
func benchStore(b *testing.B, srv *redisServer, ctxTimeouts bool) *Store {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: ctxTimeouts})
	b.Cleanup(func() { c.Close() })
	s, err := New(Options{Client: c, Budget: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkTake is one decision against a local redis-server (loopback, one
// round trip), per algorithm; BenchmarkTake/memory is the in-memory store's
// and BenchmarkTake/raw-script the bare script call, for comparison.
func BenchmarkTake(b *testing.B) {
	srv := startRedis(b)
	store := benchStore(b, srv, true)
	spawning := benchStore(b, srv, false)
	ctx := context.Background()
	b.Run("memory", func(b *testing.B) {
		mem := ratelimit.NewMemoryStore(0)
		p := benchPolicy(ratelimit.FixedWindow)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := mem.Take(ctx, "k", p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-script", func(b *testing.B) {
		// The fixed-window script straight through go-redis, without the
		// budget's goroutine and timer: what the store adds is the rest.
		p := benchPolicy(ratelimit.FixedWindow)
		keys := []string{store.key("k", p)}
		b.ReportAllocs()
		for b.Loop() {
			if err := store.fixed.Run(ctx, store.client, keys, p.Limit, int64(p.Window/time.Microsecond), 1000, "").Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.TokenBucket} {
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
	b.Run("fixed-window-goroutine", func(b *testing.B) {
		// A client without ContextTimeoutEnabled: the store holds the
		// budget with a goroutine per call.
		p := benchPolicy(ratelimit.FixedWindow)
		b.ReportAllocs()
		for b.Loop() {
			if d, err := spawning.Take(ctx, "k", p); err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
		}
	})
}

// BenchmarkMiddleware is the inbound middleware around an empty handler
// (no network between client and middleware): without a rate limit, with
// the in-memory store and with the Redis store, so the differences are the
// cost of a rate-limit decision in each.
func BenchmarkMiddleware(b *testing.B) {
	srv := startRedis(b)
	store := benchStore(b, srv, true)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	rl := func(s ratelimit.Store) *resilience.RateLimiterOptions {
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
