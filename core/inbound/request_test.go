package inbound

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// The request view is what priority and key functions see through the
// context: method, path, route pattern, headers, client IP and the
// framework's own request.
func TestRequestViewInKeyFunction(t *testing.T) {
	var got *Request
	var raw *http.Request
	var route string
	m := mustNew(t, Options{
		ClientIP: ClientIPOptions{TrustedProxies: mustPrefixes(t, "10.0.0.0/8"), IPv6Prefix: 64},
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 100, Window: time.Minute, Key: func(ctx context.Context) string {
			got, _ = RequestFrom(ctx)
			raw, _ = got.Raw.(*http.Request)
			route = got.Route()
			return keyByClientIP(ctx)
		}},
	})
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", m.Handler(okHandler))
	r := httptest.NewRequest("GET", "/items/7?q=1", nil)
	r.RemoteAddr = "10.0.0.1:5000"
	r.Header.Set("X-Forwarded-For", "2001:db8:1:2:3:4:5:6")
	r.Header.Set("X-Api-Key", "k1")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	if w.Code != 200 || got == nil {
		t.Fatalf("status %d, view %v", w.Code, got)
	}
	if got.Method != "GET" || got.Path != "/items/7" || route != "/items/{id}" ||
		got.ClientIP != netip.MustParseAddr("2001:db8:1:2:3:4:5:6") || got.ClientKey() != "2001:db8:1:2::/64" ||
		got.Header.Get("x-api-key") != "k1" || raw == nil || raw.URL.RawQuery != "q=1" {
		t.Fatalf("view = %+v", got)
	}
	ctx := newContext(context.Background(), got)
	if k := keyByHeader("x-api-key")(ctx); k != "k1" {
		t.Fatalf("KeyByHeader = %q", k)
	}
	if k := keyByHeader("X-Missing")(ctx); k != "" {
		t.Fatalf("missing header key = %q", k)
	}
	if k := keyByClientIP(context.Background()); k != "" {
		t.Fatalf("key without view = %q", k)
	}
	if _, ok := RequestFrom(context.Background()); ok {
		t.Fatal("RequestFrom without view")
	}
}

// A Priority function reads the view: requests are ranked by their path.
func TestRequestViewInPriority(t *testing.T) {
	paths := make(chan string, 4)
	m := mustNew(t, Options{Concurrency: &resilience.ConcurrencyLimiterOptions{
		PermitLimit: 1, QueueLimit: 1,
		Priority: func(ctx context.Context) int {
			r, _ := RequestFrom(ctx)
			paths <- r.Path
			return 0
		},
	}})
	held, ok := m.Limiter().TryAcquire()
	if !ok {
		t.Fatal("no permit")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := serveAsync(m.Handler(okHandler), httptest.NewRecorder(), httptest.NewRequest("GET", "/health", nil).WithContext(ctx))
	if p := <-paths; p != "/health" {
		t.Fatalf("priority saw %q", p)
	}
	cancel()
	<-done
	held.Release()
}

// The neutral API: Execute resolves the client, stores the view, takes
// the permit, times fn, and reports rejections for Render.
func TestExecute(t *testing.T) {
	m := mustNew(t, Options{Timeout: 20 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	req := &fakeRequest{method: "GET", path: "/x", addr: "192.0.2.9:1"}
	err := m.execute(context.Background(), req, func(ctx context.Context) error {
		if s := m.Stats(); s.InFlight != 1 {
			t.Errorf("stats %+v", s)
		}
		if inner := m.execute(ctx, nil, func(context.Context) error { return nil }); !errorsIsBulkhead(inner) {
			t.Errorf("second execution while full: %v", inner)
		}
		<-ctx.Done()
		return ctx.Err()
	})
	var tre *resilience.TimeoutRejectedError
	if !asTimeout(err, &tre) {
		t.Fatalf("Execute = %v, want a timeout", err)
	}
	if resp, ok := m.render(err); !ok || resp.Status != 504 {
		t.Fatalf("Render = %d %v", resp.Status, ok)
	}
	if err := m.execute(context.Background(), nil, nil); err != resilience.ErrNilCallback {
		t.Fatalf("nil callback: %v", err)
	}
	if s := m.Stats(); s.InFlight != 0 {
		t.Fatalf("stats after %+v", s)
	}
}

func errorsIsBulkhead(err error) bool {
	var b *resilience.ConcurrencyLimitRejectedError
	return errors.As(err, &b) && b.Reason == resilience.ReasonFull
}

func asTimeout(err error, target **resilience.TimeoutRejectedError) bool {
	return errors.As(err, target)
}
