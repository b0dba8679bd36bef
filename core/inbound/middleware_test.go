package inbound

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// syncRecorder is an httptest.ResponseRecorder whose methods are
// serialised and which signals when a response has been written: the 504
// is written from the timer's goroutine while the test goroutine waits.
type syncRecorder struct {
	mu      sync.Mutex
	rec     *httptest.ResponseRecorder
	header  http.Header
	written chan struct{} // closed at the first WriteHeader
	once    sync.Once
	aborted atomic.Bool // ServeHTTP panicked with http.ErrAbortHandler
}

func newSyncRecorder() *syncRecorder {
	r := httptest.NewRecorder()
	return &syncRecorder{rec: r, header: r.Header(), written: make(chan struct{})}
}

func (s *syncRecorder) Header() http.Header { return s.header }
func (s *syncRecorder) WriteHeader(code int) {
	s.mu.Lock()
	s.rec.WriteHeader(code)
	s.mu.Unlock()
	s.once.Do(func() { close(s.written) })
}
func (s *syncRecorder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.rec.Write(p)
	s.once.Do(func() { close(s.written) })
	return n, err
}
func (s *syncRecorder) Flush() {
	s.mu.Lock()
	s.rec.Flush()
	s.mu.Unlock()
}

// result returns a snapshot of what was written.
func (s *syncRecorder) result() (int, http.Header, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec.Code, s.rec.Result().Header, s.rec.Body.String()
}

func mustNew(t testing.TB, opts Options) *Middleware {
	t.Helper()
	m, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// serveAsync serves one request on its own goroutine and returns a channel
// closed when ServeHTTP has returned.
func serveAsync(h http.Handler, w http.ResponseWriter, r *http.Request) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			// net/http drops the connection on this panic; record it.
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler {
					panic(v)
				}
				if sr, ok := w.(*syncRecorder); ok {
					sr.aborted.Store(true)
				}
			}
		}()
		h.ServeHTTP(w, r)
	}()
	return done
}

func wantResponse(t *testing.T, code int, h http.Header, body string, wantCode int, wantBody string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("status = %d, want %d", code, wantCode)
	}
	if body != wantBody {
		t.Errorf("body = %s\nwant   %s", body, wantBody)
	}
	if wantBody != "" && wantBody[0] == '{' {
		if ct := h.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
		if cl := h.Get("Content-Length"); cl != strconv.Itoa(len(wantBody)) {
			t.Errorf("Content-Length = %q, want %d", cl, len(wantBody))
		}
	}
}

const (
	bodyFull         = `{"statusCode":503,"error":"Service Unavailable","message":"The server is at capacity; retry later.","code":"BULKHEAD_FULL","reason":"full"}`
	bodyQueueTimeout = `{"statusCode":503,"error":"Service Unavailable","message":"The server is at capacity; retry later.","code":"BULKHEAD_FULL","reason":"queue-timeout"}`
	bodyDropped      = `{"statusCode":503,"error":"Service Unavailable","message":"The server is at capacity; retry later.","code":"BULKHEAD_FULL","reason":"dropped"}`
	bodyTimeout      = `{"statusCode":504,"error":"Gateway Timeout","message":"The request took too long to process.","code":"TIMEOUT"}`
	body429          = `{"statusCode":429,"error":"Too Many Requests","message":"Too many requests; retry after the time in Retry-After.","code":"RATE_LIMITED"}`
)

// tableOptions is docs/DESIGN.md's configuration for the inbound table, scaled
// down in permits (the behaviour does not depend on the numbers).
func tableOptions() Options {
	return Options{
		Timeout:     5 * time.Second,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: 500 * time.Millisecond},
	}
}

// gated returns a handler that signals entry and waits for release,
// ignoring its context, then writes "ok".
func gated(entered chan<- struct{}, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if entered != nil {
			entered <- struct{}{}
		}
		<-release
		w.Write([]byte("ok"))
	})
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })

// The rows of docs/DESIGN.md's inbound table, each checked for exact status,
// body and headers, on a fake clock.
func TestInboundTable(t *testing.T) {
	t.Run("fewer than the limit in flight runs at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := mustNew(t, tableOptions()).Handler(okHandler)
			w := newSyncRecorder()
			start := time.Now()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			code, _, body := w.result()
			if code != 200 || body != "ok" || time.Since(start) != 0 {
				t.Fatalf("got %d %q after %v", code, body, time.Since(start))
			}
		})
	})
	t.Run("at the limit waits for a slot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustNew(t, tableOptions())
			release := make(chan struct{})
			h := m.Handler(gated(nil, release))
			first := serveAsync(h, newSyncRecorder(), httptest.NewRequest("GET", "/", nil))
			synctest.Wait()
			w := newSyncRecorder()
			second := serveAsync(h, w, httptest.NewRequest("GET", "/", nil))
			synctest.Wait()
			if s := m.Stats(); s.InFlight != 1 || s.Queued != 1 {
				t.Fatalf("stats = %+v, want 1 in flight, 1 queued", s)
			}
			time.Sleep(400 * time.Millisecond) // within the queue timeout
			close(release)
			<-first
			<-second
			if code, _, body := w.result(); code != 200 || body != "ok" {
				t.Fatalf("queued request got %d %q", code, body)
			}
		})
	})
	t.Run("queue full is 503 full at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustNew(t, tableOptions())
			release := make(chan struct{})
			h := m.Handler(gated(nil, release))
			first := serveAsync(h, newSyncRecorder(), httptest.NewRequest("GET", "/", nil))
			synctest.Wait()
			second := serveAsync(h, newSyncRecorder(), httptest.NewRequest("GET", "/", nil))
			synctest.Wait()
			w := newSyncRecorder()
			start := time.Now()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			if time.Since(start) != 0 {
				t.Errorf("rejection took %v", time.Since(start))
			}
			code, hdr, body := w.result()
			wantResponse(t, code, hdr, body, 503, bodyFull)
			close(release)
			<-first
			<-second
		})
	})
	t.Run("queue timeout is 503 queue-timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustNew(t, tableOptions())
			release := make(chan struct{})
			h := m.Handler(gated(nil, release))
			first := serveAsync(h, newSyncRecorder(), httptest.NewRequest("GET", "/", nil))
			synctest.Wait()
			w := newSyncRecorder()
			start := time.Now()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			if d := time.Since(start); d != 500*time.Millisecond {
				t.Errorf("waited %v, want 500ms", d)
			}
			code, hdr, body := w.result()
			wantResponse(t, code, hdr, body, 503, bodyQueueTimeout)
			close(release)
			<-first
			if s := m.Stats(); s.InFlight != 0 || s.Queued != 0 {
				t.Fatalf("stats after = %+v", s)
			}
		})
	})
	t.Run("evicted by overflow policy is 503 dropped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := tableOptions()
			opts.Concurrency.Overflow = resilience.OverflowDropOldest
			m := mustNew(t, opts)
			release := make(chan struct{})
			h := m.Handler(gated(nil, release))
			first := serveAsync(h, newSyncRecorder(), httptest.NewRequest("GET", "/", nil))
			synctest.Wait()
			w := newSyncRecorder()
			second := serveAsync(h, w, httptest.NewRequest("GET", "/", nil))
			synctest.Wait()
			third := serveAsync(h, newSyncRecorder(), httptest.NewRequest("GET", "/", nil))
			<-second
			code, hdr, body := w.result()
			wantResponse(t, code, hdr, body, 503, bodyDropped)
			close(release)
			<-first
			<-third
		})
	})
	t.Run("handler past the timeout is 504 at the deadline and its context is cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustNew(t, tableOptions())
			release := make(chan struct{})
			var cause, ctxErr, childErr error
			var lateErr error
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Handler", "leak")
				child, cancel := context.WithCancel(r.Context())
				defer cancel()
				<-release // ignores its context
				cause = context.Cause(r.Context())
				ctxErr = r.Context().Err()
				childErr = child.Err()
				_, lateErr = w.Write([]byte("late"))
			}))
			w := newSyncRecorder()
			start := time.Now()
			done := serveAsync(h, w, httptest.NewRequest("GET", "/", nil))
			<-w.written
			// written fires at the status line; let the deadline finish
			// writing the body (the handler itself stays blocked).
			synctest.Wait()
			if d := time.Since(start); d != 5*time.Second {
				t.Errorf("504 after %v, want 5s", d)
			}
			code, hdr, body := w.result()
			wantResponse(t, code, hdr, body, 504, bodyTimeout)
			if hdr.Get("Connection") != "close" || hdr.Get("X-Handler") != "" {
				t.Errorf("504 header = %v", hdr)
			}
			if s := m.Stats(); s.Late != 1 || s.InFlight != 1 {
				t.Errorf("stats while late = %+v, want late 1 and the permit held", s)
			}
			close(release)
			<-done
			// The context contract: a context that ended at its deadline
			// reports DeadlineExceeded, and so do contexts derived from it;
			// its cause says it was the inbound timeout.
			for what, err := range map[string]error{"Err": ctxErr, "child Err": childErr} {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("handler context %s = %v, want context.DeadlineExceeded", what, err)
				}
			}
			var tre *resilience.TimeoutRejectedError
			if !errors.As(cause, &tre) {
				t.Errorf("handler context cause = %v, want *resilience.TimeoutRejectedError", cause)
			}
			if !errors.Is(lateErr, http.ErrHandlerTimeout) {
				t.Errorf("late write error = %v", lateErr)
			}
			if _, _, body := w.result(); body != bodyTimeout {
				t.Errorf("late write reached the client: %q", body)
			}
			if s := m.Stats(); s.Late != 0 || s.LateTotal != 1 || s.InFlight != 0 {
				t.Errorf("stats after = %+v", s)
			}
		})
	})
	t.Run("client disconnect while queued aborts the connection and frees the queue place", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustNew(t, tableOptions())
			release := make(chan struct{})
			h := m.Handler(gated(nil, release))
			first := serveAsync(h, newSyncRecorder(), httptest.NewRequest("GET", "/", nil))
			synctest.Wait()
			ctx, cancel := context.WithCancel(context.Background())
			w := newSyncRecorder()
			second := serveAsync(h, w, httptest.NewRequest("GET", "/", nil).WithContext(ctx))
			synctest.Wait()
			cancel()
			<-second
			if code, hdr, body := w.result(); code != 200 || len(hdr) != 0 || body != "" || w.rec.Flushed || !w.aborted.Load() {
				t.Errorf("wrote %d %v %q (aborted %v), want nothing written and the connection aborted", code, hdr, body, w.aborted.Load())
			}
			if s := m.Stats(); s.Queued != 0 || s.InFlight != 1 {
				t.Errorf("stats = %+v", s)
			}
			close(release)
			<-first
		})
	})
	t.Run("client disconnect while running cancels the context, writes nothing and aborts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustNew(t, tableOptions())
			var cause error
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
				cause = context.Cause(r.Context())
			}))
			ctx, cancel := context.WithCancel(context.Background())
			w := newSyncRecorder()
			done := serveAsync(h, w, httptest.NewRequest("GET", "/", nil).WithContext(ctx))
			synctest.Wait()
			cancel()
			<-done
			if !errors.Is(cause, context.Canceled) {
				t.Errorf("cause = %v", cause)
			}
			select {
			case <-w.written:
				t.Errorf("something was written")
			default:
			}
			if !w.aborted.Load() {
				t.Errorf("the connection was not aborted: net/http would send an empty 200")
			}
			if s := m.Stats(); s.InFlight != 0 || s.Late != 0 {
				t.Errorf("stats = %+v", s)
			}
		})
	})
	t.Run("rate limit exceeded is 429 with Retry-After and RateLimit fields", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := tableOptions()
			opts.RateLimit = &resilience.RateLimiterOptions{PermitLimit: 2, Window: 10 * time.Second}
			h := mustNew(t, opts).Handler(okHandler)
			for i, wantRemaining := range []string{"1", "0"} {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
				if w.Code != 200 || w.Header().Get("RateLimit-Limit") != "2" ||
					w.Header().Get("RateLimit-Remaining") != wantRemaining || w.Header().Get("RateLimit-Reset") != "10" {
					t.Fatalf("admitted #%d: %d %v", i, w.Code, w.Header())
				}
			}
			time.Sleep(2500 * time.Millisecond)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			wantResponse(t, w.Code, w.Header(), w.Body.String(), 429, body429)
			hd := w.Header()
			if hd.Get("Retry-After") != "8" || hd.Get("RateLimit-Limit") != "2" ||
				hd.Get("RateLimit-Remaining") != "0" || hd.Get("RateLimit-Reset") != "8" {
				t.Errorf("429 header = %v", hd)
			}
		})
	})
}

// Invariant 2: whatever happens to a request, permits and queue places
// come back.
func TestPanicFreesPermitAndKeepsValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		val  any
	}{{"abort handler", http.ErrAbortHandler}, {"other value", "boom"}} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNew(t, tableOptions())
			h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(tc.val) }))
			var got any
			func() {
				defer func() { got = recover() }()
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
			}()
			if got != tc.val {
				t.Fatalf("recovered %v, want %v", got, tc.val)
			}
			if s := m.Stats(); s.InFlight != 0 {
				t.Fatalf("permit not freed: %+v", s)
			}
		})
	}
}

// Telemetry: every built-in rejection and timeout is reported.
func TestTelemetryEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		opts := Options{
			Name:        "api",
			Timeout:     time.Second,
			Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
			RateLimit:   &resilience.RateLimiterOptions{PermitLimit: 3, Window: time.Minute},
			Listener: event.ListenerFunc(func(_ context.Context, e event.Event) {
				mu.Lock()
				got = append(got, e.Pipeline+"/"+e.Strategy+"/"+string(e.Name)+"/"+e.Reason)
				mu.Unlock()
			}),
		}
		m := mustNew(t, opts)
		release := make(chan struct{})
		h := m.Handler(gated(nil, release))
		first := serveAsync(h, newSyncRecorder(), httptest.NewRequest("GET", "/", nil))
		synctest.Wait()
		h.ServeHTTP(newSyncRecorder(), httptest.NewRequest("GET", "/", nil)) // 503
		time.Sleep(time.Second)                                              // first times out
		synctest.Wait()
		h.ServeHTTP(newSyncRecorder(), httptest.NewRequest("GET", "/", nil)) // 503 (late handler holds the permit)
		h.ServeHTTP(newSyncRecorder(), httptest.NewRequest("GET", "/", nil)) // 429
		close(release)
		<-first
		want := []string{
			"api/ConcurrencyLimiter/OnConcurrencyLimiterRejected/full",
			"api/Timeout/OnTimeout/",
			"api/ConcurrencyLimiter/OnConcurrencyLimiterRejected/full",
			"api/RateLimiter/OnRateLimiterRejected/rate-limited",
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != len(want) {
			t.Fatalf("events = %q\nwant %q", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("events = %q\nwant %q", got, want)
			}
		}
	})
}

// Benchmarks: a trivial handler through httptest.NewRecorder, the request
// reused. BenchmarkHandlerAlone is the floor (the recorder's own cost).

func benchServe(b *testing.B, h http.Handler) {
	b.Helper()
	r := httptest.NewRequest("GET", "/", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatalf("status %d", w.Code)
		}
	}
}

var trivial = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })

func BenchmarkHandlerAlone(b *testing.B) { benchServe(b, trivial) }

func BenchmarkMiddlewareBare(b *testing.B) {
	benchServe(b, mustNew(b, Options{}).Handler(trivial))
}

func BenchmarkMiddlewareLimiter(b *testing.B) {
	benchServe(b, mustNew(b, Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 100, QueueTimeout: time.Second},
	}).Handler(trivial))
}

func BenchmarkMiddlewareLimiterTimeout(b *testing.B) {
	benchServe(b, mustNew(b, Options{
		Timeout:     5 * time.Second,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 100, QueueTimeout: time.Second},
	}).Handler(trivial))
}

// An HTTP/2 request under a timeout runs on its own goroutine (see
// detach.go); this is its cost next to BenchmarkMiddlewareLimiterTimeout.
func BenchmarkMiddlewareLimiterTimeoutHTTP2(b *testing.B) {
	h := mustNew(b, Options{
		Timeout:     5 * time.Second,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 100, QueueTimeout: time.Second},
	}).Handler(trivial)
	r := httptest.NewRequest("GET", "/", nil)
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatalf("status %d", w.Code)
		}
	}
}

func BenchmarkMiddlewareFull(b *testing.B) {
	benchServe(b, mustNew(b, Options{
		Timeout:     5 * time.Second,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 100, QueueTimeout: time.Second},
		RateLimit:   &resilience.RateLimiterOptions{PermitLimit: 1 << 30, Window: time.Minute},
	}).Handler(trivial))
}

// The rejection path, hottest under overload: no marshalling.
func BenchmarkMiddlewareReject503(b *testing.B) {
	m := mustNew(b, Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	m.Limiter().TryAcquire()
	h := m.Handler(trivial)
	r := httptest.NewRequest("GET", "/", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 503 {
			b.Fatalf("status %d", w.Code)
		}
	}
}

func BenchmarkMiddlewareLimiterParallel(b *testing.B) {
	h := mustNew(b, Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1 << 20},
	}).Handler(trivial)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := httptest.NewRequest("GET", "/", nil)
		for pb.Next() {
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
	})
}

// A custom pipeline's rejections render like the built-in ones, and a
// client gone while it waits gets nothing: its connection is aborted.
func TestCustomPipelineRejects(t *testing.T) {
	limiter, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := resilience.NewBuilder[struct{}]().AddStrategy(limiter).Build()
	if err != nil {
		t.Fatal(err)
	}
	m := mustNew(t, Options{Pipeline: p})
	h := m.Handler(okHandler)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != 200 || w.Body.String() != "ok" {
		t.Fatalf("admitted: %d %q", w.Code, w.Body)
	}
	held, _ := limiter.TryAcquire()
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	wantResponse(t, w.Code, w.Header(), w.Body.String(), 503, bodyFull)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sw := newSyncRecorder()
	<-serveAsync(h, sw, httptest.NewRequest("GET", "/", nil).WithContext(ctx))
	if code, hdr, body := sw.result(); len(hdr) != 0 || body != "" || !sw.aborted.Load() {
		t.Fatalf("wrote to a gone client: %d %v %q (aborted %v)", code, hdr, body, sw.aborted.Load())
	}
	held.Release()
}

// http.ResponseController reaches the connection through Unwrap for what
// the wrapper does not implement itself.
func TestResponseControllerThroughWrapper(t *testing.T) {
	hs := newHarness(t, Options{Timeout: time.Minute}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline: %v", err)
		}
		if err := rc.EnableFullDuplex(); err != nil {
			t.Errorf("EnableFullDuplex: %v", err)
		}
		w.Write([]byte("ok"))
	}), false)
	resp, err := hs.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := readAll(t, resp); body != "ok" {
		t.Fatalf("body %q", body)
	}
	<-hs.served
}
