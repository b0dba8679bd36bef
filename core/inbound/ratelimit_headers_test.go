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
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

func rateLimited(t *testing.T, style RateLimitHeaderStyle, name string) http.Handler {
	return mustNew(t, Options{
		RateLimit:        &resilience.RateLimiterOptions{Name: name, PermitLimit: 600, Window: time.Minute},
		RateLimitHeaders: style,
	}).Handler(okHandler)
}

// Invariant: RateLimitHeadersStructured sends the structured fields of
// draft-ietf-httpapi-ratelimit-headers-09 on admitted and rejected
// responses, whichever spelling ParseRateLimitHeaderStyle accepts names it.
func TestRateLimitHeadersStructured(t *testing.T) {
	for _, style := range []RateLimitHeaderStyle{RateLimitHeadersStructured, " Structured\t"} {
		t.Run(string(style), func(t *testing.T) { testRateLimitHeadersStructured(t, style) })
	}
}

func testRateLimitHeadersStructured(t *testing.T, style RateLimitHeaderStyle) {
	synctest.Test(t, func(t *testing.T) {
		h := rateLimited(t, style, "api")
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

// Invariant: RateLimitHeadersOff sends no RateLimit fields, admitted or
// rejected; the 429 keeps Retry-After.
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

// Invariant: ParseRateLimitHeaderStyle follows the rule of core's Parse
// functions. Each value round-trips through its string; case, surrounding
// space and '_' for '-' are ignored; "" is RateLimitHeadersSplit; anything
// else is a *resilience.ConfigError naming Options.RateLimitHeaders,
// quoting the input and listing exactly the accepted names.
func TestParseRateLimitHeaderStyle(t *testing.T) {
	values := []RateLimitHeaderStyle{RateLimitHeadersSplit, RateLimitHeadersStructured, RateLimitHeadersOff}
	for _, v := range values {
		for _, in := range []string{string(v), strings.ToUpper(string(v)), " " + string(v) + "\t"} {
			if got, err := parseRateLimitHeaderStyle(in); err != nil || got != v {
				t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, v)
			}
		}
	}
	if got, err := parseRateLimitHeaderStyle(" "); err != nil || got != RateLimitHeadersSplit {
		t.Errorf("Parse(blank) = %q, %v; want the default", got, err)
	}
	_, err := parseRateLimitHeaderStyle("no-such-style")
	var ce *resilience.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Options.RateLimitHeaders" || !strings.Contains(ce.Problem, `"no-such-style"`) ||
		!strings.HasSuffix(ce.Problem, `want one of "split", "structured", "off"`) {
		t.Fatalf("Parse(unknown) = %v; want a *ConfigError for Options.RateLimitHeaders quoting the input and listing the names", err)
	}
}

// Per-key limits: with keyByClientIP one client's quota does not touch
// another's; with a nil Key, as in core, every request shares one quota.
func TestRateLimitPerClientIP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := mustNew(t, Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Minute}}).Handler(okHandler)
		h := mustNew(t, Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Minute, Key: keyByClientIP}}).Handler(okHandler)
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
		fw := framework{
			View:      func(raw any, v *Request) { v.RemoteAddr = raw.(*fakeRequest).addr },
			SetHeader: func(raw any, k, v string) { got[k] = v },
		}
		m, err := newFor(fw, Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 5, Window: 10 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		var view *Request
		m2, _ := newFor(fw, Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 5, Window: 10 * time.Second, Key: func(ctx context.Context) string {
			view, _ = RequestFrom(ctx)
			return "k"
		}}})
		err = m.execute(t.Context(), &fakeRequest{addr: "192.0.2.1:1"}, func(_ context.Context) error {
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
		if err := m2.execute(t.Context(), &fakeRequest{}, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if d, ok := view.RateLimit(); !ok || d.Remaining != 4 {
			t.Fatalf("decision %+v %v", d, ok)
		}
	})
}

type failingStore struct{}

func (failingStore) Take(context.Context, string, ratelimit.Policy) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.New("store down: secret-host:6379")
}

// A failing store fails open by default (admitted, no numbers to report)
// and, with FailClosed, refuses with a 503 that hides the store's error.
func TestRateLimitStoreFailure(t *testing.T) {
	for _, closed := range []bool{false, true} {
		var events []string
		h := mustNew(t, Options{
			RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Minute, Store: failingStore{}, FailClosed: closed},
			Listener: event.ListenerFunc(func(_ context.Context, e event.Event) {
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
