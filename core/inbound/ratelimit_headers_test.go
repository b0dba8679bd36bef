package inbound

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

func rateLimited(t *testing.T, style RateLimitHeaderStyle, name string) http.Handler {
	return mustNew(t, Options{
		RateLimit:        &resilience.RateLimiterOptions{Name: name, PermitLimit: 600, Window: time.Minute},
		RateLimitHeaders: style,
	}).Handler(okHandler)
}

// The structured fields of draft-ietf-httpapi-ratelimit-headers-09 on
// admitted and rejected responses.
func TestRateLimitHeadersStructured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := rateLimited(t, RateLimitHeadersStructured, "api")
		time.Sleep(18 * time.Second) // into the fixed window's own timeline
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if got := w.Header().Get("RateLimit-Policy"); got != `"api";q=600;w=60` {
			t.Errorf("RateLimit-Policy = %q", got)
		}
		if got := w.Header().Get("RateLimit"); got != `"api";r=599;t=60` {
			t.Errorf("RateLimit = %q", got)
		}
		if w.Header().Get("RateLimit-Limit") != "" {
			t.Errorf("split fields sent in structured style")
		}
		for range 599 {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}
		time.Sleep(17 * time.Second)
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != 429 || w.Header().Get("RateLimit") != `"api";r=0;t=43` ||
			w.Header().Get("RateLimit-Policy") != `"api";q=600;w=60` || w.Header().Get("Retry-After") != "43" {
			t.Errorf("rejected: %d %v", w.Code, w.Header())
		}
	})
}

func TestRateLimitHeadersOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Options{
			RateLimit:        &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Minute},
			RateLimitHeaders: RateLimitHeadersOff,
		}).Handler(okHandler)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Header().Get("RateLimit-Limit") != "" || w.Header().Get("RateLimit") != "" {
			t.Errorf("admitted headers %v", w.Header())
		}
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != 429 || w.Header().Get("Retry-After") != "60" || w.Header().Get("RateLimit-Limit") != "" {
			t.Errorf("rejected: %d %v", w.Code, w.Header())
		}
	})
}

// Per-key limits: with KeyByClientIP one client's quota does not touch
// another's; with a nil Key, as in core, every request shares one quota.
func TestRateLimitPerClientIP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := mustNew(t, Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Minute}}).Handler(okHandler)
		h := mustNew(t, Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Minute, Key: KeyByClientIP}}).Handler(okHandler)
		send := func(h http.Handler, addr string) int {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = addr
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Code
		}
		req := func(addr string) int { return send(h, addr) }
		if req("192.0.2.1:1") != 200 || req("192.0.2.1:2") != 429 || req("192.0.2.2:1") != 200 {
			t.Fatal("quota not per client IP")
		}
		if send(shared, "192.0.2.1:1") != 200 || send(shared, "192.0.2.2:1") != 429 {
			t.Fatal("a nil Key does not share one quota")
		}
	})
}

func TestStructuredName(t *testing.T) {
	for in, want := range map[string]string{
		"":       `"default"`,
		"api":    `"api"`,
		`a"b\c`:  `"a\"b\\c"`,
		"ü\x01x": `"___x"`,
	} {
		if got := structuredName(in); got != want {
			t.Errorf("structuredName(%q) = %s, want %s", in, got, want)
		}
	}
}

// The neutral API sets the same fields through the adapter's setter.
func TestRateLimitHeadersForAdapters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := map[string]string{}
		fw := Framework{
			View:      func(raw any, v *Request) { v.RemoteAddr = raw.(*fakeRequest).addr },
			SetHeader: func(raw any, k, v string) { got[k] = v },
		}
		m, err := NewFor(fw, Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 5, Window: 10 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		var view *Request
		m2, _ := NewFor(fw, Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 5, Window: 10 * time.Second, Key: func(ctx context.Context) string {
			view, _ = RequestFrom(ctx)
			return "k"
		}}})
		err = m.Execute(t.Context(), &fakeRequest{addr: "192.0.2.1:1"}, func(_ context.Context) error {
			if len(got) != 3 {
				t.Errorf("headers not set before fn: %v", got)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got[hdrLimit] != "5" || got[hdrRemaining] != "4" || got[hdrReset] != "10" || len(got) != 3 {
			t.Fatalf("headers %v", got)
		}
		if err := m2.Execute(t.Context(), &fakeRequest{}, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if d, ok := view.RateLimit(); !ok || d.Remaining != 4 {
			t.Fatalf("decision %+v %v", d, ok)
		}
	})
}

type failingStore struct{}

func (failingStore) Take(context.Context, string, resilience.RateLimitPolicy) (resilience.RateLimitDecision, error) {
	return resilience.RateLimitDecision{}, errors.New("store down: secret-host:6379")
}

// A failing store fails open by default (admitted, no numbers to report)
// and, with FailClosed, refuses with a 503 that hides the store's error.
func TestRateLimitStoreFailure(t *testing.T) {
	for _, closed := range []bool{false, true} {
		var events []string
		h := mustNew(t, Options{
			RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Minute, Store: failingStore{}, FailClosed: closed},
			Listener: resilience.ListenerFunc(func(_ context.Context, e resilience.Event) {
				events = append(events, string(e.Name)+"/"+e.Reason)
			}),
		}).Handler(okHandler)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		wantCode, wantEvent := 200, "OnRateLimiterStoreError/fail-open"
		if closed {
			wantCode, wantEvent = 503, "OnRateLimiterStoreError/fail-closed"
		}
		if w.Code != wantCode || w.Header().Get("RateLimit-Limit") != "" || strings.Contains(w.Body.String(), "secret") {
			t.Errorf("FailClosed=%v: %d %v %q", closed, w.Code, w.Header(), w.Body)
		}
		if len(events) != 1 || events[0] != wantEvent {
			t.Errorf("FailClosed=%v: events %v", closed, events)
		}
	}
}
