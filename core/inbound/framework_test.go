package inbound

import (
	"context"
	"errors"
	"github.com/ylcnfrht/resilience/core/internal/route"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// The net/http default reads the ServeMux pattern without its method or
// host.
func TestPatternRoute(t *testing.T) {
	for in, want := range map[string]string{
		"":                              "",
		"/users/{id}":                   "/users/{id}",
		"GET /users/{id}":               "/users/{id}",
		"GET example.com/users/{id}":    "/users/{id}",
		"example.com/":                  "/",
		"POST /files/{path...}":         "/files/*",
		"/items/{$}":                    "/items/",
		"DELETE  /spaced/{id}":          "/spaced/{id}",
		"GET /users/{id}/friends/{fid}": "/users/{id}/friends/{fid}",
	} {
		if got := patternRoute(&http.Request{Pattern: in}); got != want {
			t.Errorf("PatternRoute(%q) = %q, want %q", in, got, want)
		}
	}
	if got := patternRoute("not a request"); got != "" {
		t.Errorf("PatternRoute(string) = %q", got)
	}
}

// Route is resolved lazily: the adapter's RouteFunc runs at most once per
// request, and only when something reads Route, whichever goroutines read
// it.
func TestRouteResolvedOnceAndOnlyWhenRead(t *testing.T) {
	var calls atomic.Int32
	fw := framework{Route: func(raw any) string {
		calls.Add(1)
		return route.Colon(raw.(*http.Request).Header.Get("X-Route"))
	}}
	readers := func(read bool) Options {
		return Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1 << 20, Window: time.Hour, Key: func(ctx context.Context) string {
			v, _ := RequestFrom(ctx)
			if !read {
				return v.Method
			}
			var wg sync.WaitGroup
			routes := make([]string, 4)
			for i := range routes {
				wg.Go(func() { routes[i] = v.Route() })
			}
			wg.Wait()
			for _, r := range routes {
				if r != "/users/{id}" {
					t.Errorf("Route() = %q", r)
				}
			}
			return "k"
		}}}
	}
	for _, read := range []bool{false, true} {
		calls.Store(0)
		m, err := newFor(fw, readers(read))
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/users/7", nil)
		r.Header.Set("X-Route", "/users/:id")
		w := httptest.NewRecorder()
		m.Handler(okHandler).ServeHTTP(w, r)
		want := int32(0)
		if read {
			want = 1
		}
		if w.Code != 200 || calls.Load() != want {
			t.Errorf("read=%v: status %d, RouteFunc ran %d times, want %d", read, w.Code, calls.Load(), want)
		}
	}
}

// ginLike stands for a framework built on net/http with its own context
// object, which it passes down its chain.
type ginLike struct {
	w    http.ResponseWriter
	r    *http.Request
	next http.Handler
}

func continueGinLike(w http.ResponseWriter, r *http.Request, raw any) {
	c := raw.(*ginLike)
	c.w, c.r = w, r
	c.next.ServeHTTP(w, r)
}

// Timed is the middleware's own decision, which an adapter reads instead of
// re-deriving it from Options: the chain gets the timed writer through
// Serve exactly when Timed reports true (a timeout, or a custom pipeline
// whose timeout strategy may end the request).
func TestTimedIsWhatServeDoes(t *testing.T) {
	pipeline, err := resilience.NewBuilder[struct{}]().AddConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 1}).Build()
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]Options{
		"no stage":        {},
		"limiter":         {Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, Priority: func(context.Context) int { return 0 }}},
		"adaptive":        {Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 1}},
		"rate limit":      {RateLimit: &resilience.RateLimiterOptions{PermitLimit: 10, Window: time.Minute}},
		"timeout":         {Timeout: time.Minute},
		"limiter+timeout": {Timeout: time.Minute, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}},
		"pipeline":        {Pipeline: pipeline},
	} {
		m := mustNew(t, opts)
		var timedWriter bool
		raw := &ginLike{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, timedWriter = w.(*timeoutWriter)
		})}
		if err := m.serve(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), raw, continueGinLike); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.timed() != timedWriter {
			t.Errorf("%s: Timed() %v, but the chain got the timed writer: %v", name, m.timed(), timedWriter)
		}
		if want := opts.Timeout > 0 || opts.Pipeline != nil; m.timed() != want {
			t.Errorf("%s: Timed() %v, want %v", name, m.timed(), want)
		}
	}
}

// Serve is the entry point for frameworks on net/http: the framework's
// object is the view's Raw, the chain continues through a static
// continuation with the writer and request to use, and a rejection before
// the handler is returned for the framework to render, not written.
func TestServeReturnsRejectionsAndPassesRaw(t *testing.T) {
	var sawRaw any
	var sawRoute string
	entered, release := make(chan struct{}), make(chan struct{})
	m, err := newFor(framework{Route: func(raw any) string { return route.Colon("/hold/:id") }}, Options{
		Timeout: time.Minute,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, Priority: func(ctx context.Context) int {
			v, _ := RequestFrom(ctx)
			sawRaw, sawRoute = v.Raw, v.Route()
			return 0
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	held := &ginLike{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Context().Deadline(); !ok {
			t.Error("the continuation's request does not carry the timeout")
		}
		close(entered)
		<-release
		w.WriteHeader(201)
	})}
	w1 := httptest.NewRecorder()
	r1 := httptest.NewRequest("GET", "/hold/1", nil)
	done := make(chan error, 1)
	go func() { done <- m.serve(w1, r1, held, continueGinLike) }()
	<-entered

	second := &ginLike{next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("rejected request ran") })}
	w2 := httptest.NewRecorder()
	err = m.serve(w2, httptest.NewRequest("GET", "/hold/2", nil), second, continueGinLike)
	var b *resilience.ConcurrencyLimitRejectedError
	if !errors.As(err, &b) || b.Reason != resilience.ReasonFull {
		t.Fatalf("Serve while full = %v, want a bulkhead rejection", err)
	}
	if w2.Code != 200 || w2.Body.Len() != 0 || len(w2.Header()) != 0 {
		t.Errorf("Serve wrote the rejection itself: %d %v %q", w2.Code, w2.Header(), w2.Body)
	}
	if resp, ok := m.render(err); !ok || resp.Status != 503 {
		t.Errorf("Render = %d %v", resp.Status, ok)
	}
	// The queue is 0, so the Priority function never ran.
	if sawRaw != nil {
		t.Errorf("priority ran without a queue")
	}
	close(release)
	if err := <-done; err != nil || w1.Code != 201 || held.w == nil || held.r == r1 {
		t.Fatalf("held: err %v, status %d; the continuation got writer %v and the original request %v", err, w1.Code, held.w != nil, held.r == r1)
	}
	if err := m.serve(w1, r1, nil, nil); err != resilience.ErrNilCallback {
		t.Errorf("nil continuation: %v", err)
	}

	// With a queue, the priority function sees the framework's object and
	// the route.
	mq, _ := newFor(framework{Route: func(raw any) string { return route.Colon("/q/:id") }}, Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Nanosecond, Priority: func(ctx context.Context) int {
			v, _ := RequestFrom(ctx)
			sawRaw, sawRoute = v.Raw, v.Route()
			return 0
		}},
	})
	permit, ok := mq.Limiter().TryAcquire()
	if !ok {
		t.Fatal("no permit")
	}
	q := &ginLike{next: okHandler}
	if err := mq.serve(httptest.NewRecorder(), httptest.NewRequest("GET", "/q/1", nil), q, continueGinLike); !errors.As(err, &b) {
		t.Errorf("queued request: %v, want a queue timeout", err)
	}
	permit.Release()
	if sawRaw != q || sawRoute != "/q/{id}" {
		t.Errorf("priority saw Raw %v and Route %q", sawRaw, sawRoute)
	}
}
