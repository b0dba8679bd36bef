package resiliencechi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/goleak"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"

	"github.com/ylcnfrht/resilience/adapters/chi"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// routeRecorder is a rate-limit key function that records the route
// pattern each request showed the middleware, by request path.
type routeRecorder struct {
	mu     sync.Mutex
	routes map[string]string
}

func (rr *routeRecorder) key(ctx context.Context) string {
	v, ok := inbound.RequestFrom(ctx)
	if !ok {
		return ""
	}
	rr.mu.Lock()
	rr.routes[v.Method+" "+v.Path] = v.Route()
	rr.mu.Unlock()
	return "one-key"
}

func (rr *routeRecorder) get(k string) (string, bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	r, ok := rr.routes[k]
	return r, ok
}

// TestRoutePatternVisible: a key or priority function running in the
// middleware, before chi has routed, sees the pattern chi will match —
// through groups, mounted sub-routers and wildcards — and the handler
// still sees chi's own routing afterwards.
func TestRoutePatternVisible(t *testing.T) {
	rec := &routeRecorder{routes: map[string]string{}}
	mw, err := resiliencechi.New(inbound.Options{
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1 << 20, Window: time.Hour, Key: rec.key},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The handler reports chi's pattern and URL parameter after routing.
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, chi.RouteContext(r.Context()).RoutePattern()+" id="+chi.URLParam(r, "id"))
	})

	r := chi.NewRouter()
	r.Get("/healthz", echo) // outside the middleware
	r.Group(func(r chi.Router) {
		r.Use(mw.Handler)
		r.Get("/users/{id}", echo)
		r.Post("/users", echo)
		r.Get("/static/*", echo)
		r.Route("/api", func(r chi.Router) {
			r.Get("/items/{id}", echo)
			r.Mount("/v2", v2Router(mw, echo))
		})
	})
	srv := httptest.NewServer(r)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	tests := []struct {
		name, method, path string
		wantStatus         int
		wantRoute          string // what the key function saw; "-" means it must not run
		wantBody           string
	}{
		{"param", "GET", "/users/42", 200, "/users/{id}", "/users/{id} id=42"},
		{"static", "POST", "/users", 200, "/users", "/users id="},
		{"wildcard", "GET", "/static/css/site.css", 200, "/static/*", "/static/* id="},
		{"nested route", "GET", "/api/items/7", 200, "/api/items/{id}", "/api/items/{id} id=7"},
		{"mounted sub-router, middleware used twice", "GET", "/api/v2/things/9", 200, "/api/v2/things/{id}", "/api/v2/things/{id} id=9"},
		// A group's middleware runs only for the group's routes.
		{"no such route", "GET", "/nowhere", 404, "-", ""},
		{"method not allowed", "DELETE", "/users/42", 405, "-", ""},
		{"health, outside the middleware", "GET", "/healthz", 200, "-", "/healthz id="},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tc.wantStatus, body)
			}
			if tc.wantBody != "" && string(body) != tc.wantBody {
				t.Errorf("handler saw %q, want %q", body, tc.wantBody)
			}
			got, ran := rec.get(tc.method + " " + tc.path)
			switch {
			case tc.wantRoute == "-" && ran:
				t.Errorf("the key function ran for a route outside the middleware")
			case tc.wantRoute != "-" && !ran:
				t.Errorf("the key function did not run")
			case tc.wantRoute != "-" && got != tc.wantRoute:
				t.Errorf("the key function saw route %q, want %q", got, tc.wantRoute)
			}
		})
	}
}

func v2Router(mw *resiliencechi.Middleware, h http.Handler) http.Handler {
	r := chi.NewRouter()
	r.Use(mw.Handler)
	r.Method(http.MethodGet, "/things/{id}", h)
	return r
}

// TestRejectionsThroughChi: each inbound outcome reaches a chi client with
// its status, code and headers; a route-keyed rate limit counts per route.
func TestRejectionsThroughChi(t *testing.T) {
	byRoute := func(ctx context.Context) string {
		v, _ := inbound.RequestFrom(ctx)
		return v.Route()
	}
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	mw, err := resiliencechi.New(inbound.Options{
		Timeout:     100 * time.Millisecond,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
		RateLimit:   &resilience.RateLimiterOptions{PermitLimit: 2, Window: time.Hour, Key: byRoute},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(mw.Handler)
	r.Get("/hold", func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	})
	r.Get("/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	r.Get("/ok/{n}", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := httptest.NewServer(r)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}

	held := make(chan *http.Response, 1)
	go func() {
		resp, err := srv.Client().Get(srv.URL + "/hold")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		held <- resp
	}()
	<-entered

	tests := []struct {
		name, path string
		status     int
		code       string
		header     string
	}{
		{"server full: 503", "/ok/1", 503, `"code":"BULKHEAD_FULL"`, ""},
		{"route quota left: 503 again", "/ok/2", 503, `"code":"BULKHEAD_FULL"`, ""},
		{"route quota spent: 429 even when full", "/ok/3", 429, `"code":"RATE_LIMITED"`, "Retry-After"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(tc.path)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.code) {
				t.Errorf("got %d %s, want %d with %s", resp.StatusCode, body, tc.status, tc.code)
			}
			if tc.header != "" && resp.Header.Get(tc.header) == "" {
				t.Errorf("%s missing", tc.header)
			}
		})
	}
	// The held handler ignores its context: its 504 comes at the
	// deadline, before it is released.
	if resp := <-held; resp == nil || resp.StatusCode != 504 {
		t.Errorf("held request: %v, want 504", resp)
	}
	close(release)
	// The released handler returns its permit when it really ends; wait
	// for that (bounded) rather than sleep a guess.
	deadline := time.Now().Add(10 * time.Second)
	for st := mw.Stats(); st.InFlight != 0 || st.Queued != 0; st = mw.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("stats after the requests: %+v, want nothing in flight or queued", st)
		}
		time.Sleep(time.Millisecond)
	}
	t.Run("timeout: 504", func(t *testing.T) {
		resp, body := get("/slow")
		if resp.StatusCode != 504 || !strings.Contains(body, `"code":"TIMEOUT"`) {
			t.Errorf("got %d %s, want 504 TIMEOUT", resp.StatusCode, body)
		}
	})
}

// TestInvalidOptions: bad configuration is an error naming the field, from
// both constructors, never a panic per request.
func TestInvalidOptions(t *testing.T) {
	bad := inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 0}}
	_, err1 := resiliencechi.New(bad)
	_, err2 := resiliencechi.NewMiddleware(bad)
	for _, err := range []error{err1, err2} {
		var ce *resilience.ConfigError
		if !errors.As(err, &ce) || ce.Field != "ConcurrencyLimiterOptions.PermitLimit" || !errors.Is(err, resilience.ErrInvalidOptions) {
			t.Errorf("err = %v, want a *resilience.ConfigError for ConcurrencyLimiterOptions.PermitLimit", err)
		}
	}
}

// TestRoutePatternAtRoot: with the middleware on the root router (r.Use
// before any route), every request passes through it before chi routes;
// the key function sees the pattern, or "" when no route matches. A
// parameter's regular expression is not part of the route, so a function
// comparing routes carries over to and from the other adapters.
func TestRoutePatternAtRoot(t *testing.T) {
	rec := &routeRecorder{routes: map[string]string{}}
	mw, err := resiliencechi.NewMiddleware(inbound.Options{
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1 << 20, Window: time.Hour, Key: rec.key},
	})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	r := chi.NewRouter()
	r.Use(mw)
	r.Get("/users/{id}", ok)
	r.Route("/api", func(r chi.Router) { r.Get("/items/{id}/*", ok) })
	r.Get("/orders/{id:[0-9]+}", ok)
	r.Get(`/days/{day:\d{4}-\d{2}-\d{2}}/slots/{slot}`, ok)
	r.Get("/files/{name}.{ext:[a-z]+}", ok)

	tests := []struct{ method, path, want string }{
		{"GET", "/users/42", "/users/{id}"},
		{"GET", "/api/items/7/photos/1", "/api/items/{id}/*"},
		{"GET", "/orders/12", "/orders/{id}"},
		{"GET", "/days/2026-12-01/slots/3", "/days/{day}/slots/{slot}"},
		{"GET", "/files/report.pdf", "/files/{name}.{ext}"},
		{"GET", "/nowhere", ""},
		{"POST", "/users/42", ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tc.method, tc.path, nil))
			got, ran := rec.get(tc.method + " " + tc.path)
			if !ran || got != tc.want {
				t.Errorf("key function saw route %q (ran %v), want %q", got, ran, tc.want)
			}
		})
	}
}

// BenchmarkMiddleware measures a request through a chi router with the
// adapter against the same router with the bare inbound middleware, so the
// difference is the adapter's cost: nothing without a function that reads
// the route, the route lookup with one.
func BenchmarkMiddleware(b *testing.B) {
	key := func(ctx context.Context) string { return "k" }
	limiterOnly := inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1 << 20}}
	rateLimited := inbound.Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1 << 20},
		RateLimit:   &resilience.RateLimiterOptions{PermitLimit: 1 << 30, Window: time.Hour, Key: key},
	}
	for _, bc := range []struct {
		name string
		opts inbound.Options
		new  func(inbound.Options) (func(http.Handler) http.Handler, error)
	}{
		{"limiter-only/inbound", limiterOnly, inboundMiddleware},
		{"limiter-only/chi", limiterOnly, resiliencechi.NewMiddleware},
		{"rate-limit/inbound", rateLimited, inboundMiddleware},
		{"rate-limit/chi-with-route", rateLimited, resiliencechi.NewMiddleware},
	} {
		b.Run(bc.name, func(b *testing.B) {
			mw, err := bc.new(bc.opts)
			if err != nil {
				b.Fatal(err)
			}
			r := chi.NewRouter()
			r.Use(mw)
			r.Get("/users/{id}", func(w http.ResponseWriter, r *http.Request) {})
			r.Route("/api", func(r chi.Router) {
				r.Get("/items/{id}", func(w http.ResponseWriter, r *http.Request) {})
			})
			req := httptest.NewRequest(http.MethodGet, "/api/items/7", nil)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				r.ServeHTTP(w, req)
			}
		})
	}
}

// inboundMiddleware is the plain net/http middleware, as a function of
// the shape chi's NewMiddleware has.
func inboundMiddleware(opts inbound.Options) (func(http.Handler) http.Handler, error) {
	m, err := inbound.New(opts)
	if err != nil {
		return nil, err
	}
	return m.Handler, nil
}
