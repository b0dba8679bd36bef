package inbound

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/limit"
)

// outcomeRecorder is a limit.Algorithm that keeps the limit and records the
// windows it is given. With InitialLimit 1 every counted release closes a
// window (the first one at once), so each window is one request's outcome.
type outcomeRecorder struct {
	mu      sync.Mutex
	windows []limit.Sample
}

func (o *outcomeRecorder) Update(s limit.Sample) float64 {
	o.mu.Lock()
	o.windows = append(o.windows, s)
	o.mu.Unlock()
	return s.Limit
}

// outcome reports how the single request was counted.
func (o *outcomeRecorder) outcome() resilience.LimitOutcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case len(o.windows) == 0:
		return resilience.LimitIgnored
	case o.windows[0].Drops > 0:
		return resilience.LimitDropped
	}
	return resilience.LimitSampled
}

func adaptiveOptions(rec *outcomeRecorder, timeout time.Duration) Options {
	return Options{Timeout: timeout, Adaptive: &resilience.AdaptiveLimiterOptions{Algorithm: rec, InitialLimit: 1}}
}

func TestAdaptiveOptionsValidation(t *testing.T) {
	a := &resilience.AdaptiveLimiterOptions{}
	p, err := resilience.NewBuilder[struct{}]().Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts  Options
		field string
	}{
		{Options{Adaptive: a, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, "Options.Adaptive"},
		{Options{Adaptive: a, Pipeline: p}, "Options.Adaptive"},
		{Options{Adaptive: &resilience.AdaptiveLimiterOptions{MinLimit: 5, MaxLimit: 2}}, "AdaptiveLimiterOptions.MinLimit"},
	} {
		_, err := New(c.opts)
		var ce *resilience.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("New(%+v) = %v, want a *ConfigError for %s", c.opts, err, c.field)
		}
	}
	m := mustNew(t, Options{Adaptive: a})
	if m.AdaptiveLimiter() == nil || m.Limiter() != nil {
		t.Fatal("Adaptive did not build an adaptive limiter")
	}
}

// The inbound classification through the net/http middleware, with and
// without a timeout: the timeout is a drop, 4xx / client gone / hijack /
// panic are ignored, everything else (5xx included) is a sample.
func TestAdaptiveHandlerClassification(t *testing.T) {
	status := func(code int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) })
	}
	cases := []struct {
		name    string
		handler http.Handler
		ctx     func(context.Context) (context.Context, context.CancelFunc)
		want    resilience.LimitOutcome
	}{
		{"200", status(200), nil, resilience.LimitSampled},
		{"implicit 200", okHandler, nil, resilience.LimitSampled},
		{"headers only", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), nil, resilience.LimitSampled},
		{"flush", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.(http.Flusher).Flush() }), nil, resilience.LimitSampled},
		{"500", status(500), nil, resilience.LimitSampled},
		{"503 from the handler", status(503), nil, resilience.LimitSampled},
		{"404", status(404), nil, resilience.LimitIgnored},
		{"429", status(429), nil, resilience.LimitIgnored},
		{"103 then 400", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(103)
			w.WriteHeader(400)
		}), nil, resilience.LimitIgnored},
		{"client gone", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}), func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(time.Second, cancel)
			return ctx, cancel
		}, resilience.LimitIgnored},
		{"upstream deadline", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}), func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 2*time.Second)
		}, resilience.LimitDropped},
	}
	for _, timeout := range []time.Duration{0, time.Minute} {
		for _, c := range cases {
			t.Run(c.name+"/timeout="+timeout.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					rec := &outcomeRecorder{}
					m := mustNew(t, adaptiveOptions(rec, timeout))
					r := httptest.NewRequest("GET", "/", nil)
					if c.ctx != nil {
						ctx, cancel := c.ctx(r.Context())
						defer cancel()
						r = r.WithContext(ctx)
					}
					func() {
						// A handler that returns without a word once its
						// client left has its connection aborted.
						defer func() {
							if v := recover(); v != nil && (v != http.ErrAbortHandler || c.name != "client gone") {
								panic(v)
							}
						}()
						m.Handler(c.handler).ServeHTTP(httptest.NewRecorder(), r)
					}()
					if got := rec.outcome(); got != c.want {
						t.Fatalf("counted as %v, want %v", got, c.want)
					}
					if s := m.Stats(); s.InFlight != 0 {
						t.Fatalf("permit not returned: %+v", s)
					}
				})
			})
		}
	}
}

// A handler that runs past the inbound timeout is a drop, whether it
// ignored its context (504 at the deadline) or had committed its response
// (aborted); its permit is held until it returns.
func TestAdaptiveTimeoutIsADrop(t *testing.T) {
	for _, committed := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			rec := &outcomeRecorder{}
			m := mustNew(t, adaptiveOptions(rec, time.Second))
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if committed {
					w.WriteHeader(200)
				}
				time.Sleep(2 * time.Second) // ignores its context
				if m.Stats().InFlight != 1 {
					t.Error("permit released before the handler returned")
				}
			}))
			w := httptest.NewRecorder()
			func() {
				defer func() {
					if v := recover(); v != nil && v != http.ErrAbortHandler {
						panic(v)
					}
				}()
				h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			}()
			if !committed && w.Code != http.StatusGatewayTimeout {
				t.Fatalf("status %d, want 504", w.Code)
			}
			if got := rec.outcome(); got != resilience.LimitDropped {
				t.Fatalf("committed=%v: counted as %v, want a drop", committed, got)
			}
			if s := m.Stats(); s.InFlight != 0 {
				t.Fatalf("permit not returned: %+v", s)
			}
		})
	}
}

// Invariant 2: a panicking handler returns its permit and is not counted.
func TestAdaptivePanicIsIgnored(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Minute} {
		rec := &outcomeRecorder{}
		m := mustNew(t, adaptiveOptions(rec, timeout))
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") }))
		func() {
			defer func() {
				if recover() != "boom" {
					t.Fatal("panic did not propagate unchanged")
				}
			}()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}()
		if got := rec.outcome(); got != resilience.LimitIgnored {
			t.Fatalf("timeout=%v: counted as %v, want ignored", timeout, got)
		}
		if s := m.Stats(); s.InFlight != 0 {
			t.Fatalf("permit not returned: %+v", s)
		}
	}
}

// The neutral Execute path classifies by fn's error: the inbound timeout
// is a drop, the request's context cancelled is ignored (abandoned before
// the limiter has a baseline, see TestAbandonedClientOutcome), a panic is
// ignored, success and other errors are samples.
func TestAdaptiveExecuteClassification(t *testing.T) {
	cases := []struct {
		name string
		fn   func(ctx context.Context) error
		ctx  func(context.Context) (context.Context, context.CancelFunc)
		want resilience.LimitOutcome
	}{
		{"success", func(context.Context) error { return nil }, nil, resilience.LimitSampled},
		{"error", func(context.Context) error { return errors.New("boom") }, nil, resilience.LimitSampled},
		{"inbound timeout", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, nil, resilience.LimitDropped},
		{"client gone", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
			func(ctx context.Context) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(ctx)
				time.AfterFunc(time.Second, cancel)
				return ctx, cancel
			}, resilience.LimitIgnored}, // abandoned, and the limiter has no baseline yet

	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &outcomeRecorder{}
				m := mustNew(t, adaptiveOptions(rec, 5*time.Second))
				ctx := context.Background()
				if c.ctx != nil {
					var cancel context.CancelFunc
					ctx, cancel = c.ctx(ctx)
					defer cancel()
				}
				_ = m.execute(ctx, nil, c.fn)
				if got := rec.outcome(); got != c.want {
					t.Fatalf("counted as %v, want %v", got, c.want)
				}
			})
		})
	}
	rec := &outcomeRecorder{}
	m := mustNew(t, adaptiveOptions(rec, 0))
	func() {
		defer func() { _ = recover() }()
		_ = m.execute(context.Background(), nil, func(context.Context) error { panic("boom") })
	}()
	if got := rec.outcome(); got != resilience.LimitIgnored || m.Stats().InFlight != 0 {
		t.Fatalf("panic: counted as %v, stats %+v", got, m.Stats())
	}
	// A full limiter rejects through Execute like the fixed one.
	p, _ := m.AdaptiveLimiter().TryAcquire()
	err := m.execute(context.Background(), nil, func(context.Context) error { return nil })
	if !errorsIsBulkhead(err) {
		t.Fatalf("Execute on a full limiter = %v", err)
	}
	p.Release(resilience.LimitIgnored)
}

// Stats reports the adaptive limiter's live limit, in-flight and queued
// counts; a full limiter answers 503 BULKHEAD_FULL.
func TestAdaptiveStatsAndRejection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustNew(t, Options{Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 1, MaxLimit: 4, QueueLimit: 1, QueueTimeout: time.Minute}})
		release := make(chan struct{})
		h := m.Handler(gated(nil, release))
		done1 := serveAsync(h, httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		synctest.Wait()
		w2 := httptest.NewRecorder()
		done2 := serveAsync(h, w2, httptest.NewRequest("GET", "/", nil))
		synctest.Wait()
		if s := m.Stats(); s.Limit != 1 || s.InFlight != 1 || s.Queued != 1 {
			t.Fatalf("Stats() = %+v, want limit 1, in flight 1, queued 1", s)
		}
		w3 := httptest.NewRecorder()
		h.ServeHTTP(w3, httptest.NewRequest("GET", "/", nil))
		if w3.Code != http.StatusServiceUnavailable {
			t.Fatalf("third request: status %d, want 503", w3.Code)
		}
		close(release)
		<-done1
		<-done2
		if w2.Code != 200 {
			t.Fatalf("queued request: status %d", w2.Code)
		}
		if s := m.Stats(); s.InFlight != 0 || s.Queued != 0 {
			t.Fatalf("after: %+v", s)
		}
	})
}

// Without a timeout the status-recording writer keeps Flush, Hijack and
// http.ResponseController working, over a real connection.
func TestAdaptiveStatusWriterPassesThrough(t *testing.T) {
	rec := &outcomeRecorder{}
	m := mustNew(t, adaptiveOptions(rec, 0))
	mux := http.NewServeMux()
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline: %v", err)
		}
		w.Write([]byte("a"))
		if err := rc.Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		w.(http.Flusher).Flush()
	})
	mux.HandleFunc("/hijack", func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
		rw.Flush()
	})
	srv := httptest.NewServer(m.Handler(mux))
	defer srv.Close()
	for _, c := range []struct {
		path string
		body string
		want int // windows recorded after the request
	}{{"/stream", "a", 1}, {"/hijack", "hi", 1}} {
		resp, err := srv.Client().Get(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != c.body {
			t.Fatalf("%s: body %q", c.path, b)
		}
		// The permit is released after the body is sent: wait for it.
		deadline := time.Now().Add(10 * time.Second)
		for m.Stats().InFlight != 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		rec.mu.Lock()
		n := len(rec.windows)
		rec.mu.Unlock()
		if n != c.want {
			t.Fatalf("%s: %d windows, want %d (the hijacked request is not counted)", c.path, n, c.want)
		}
	}
	var sw http.ResponseWriter = &statusWriter{w: httptest.NewRecorder()}
	if _, ok := sw.(interface{ Unwrap() http.ResponseWriter }); !ok {
		t.Fatal("statusWriter has no Unwrap")
	}
	if _, _, err := sw.(http.Hijacker).Hijack(); err == nil {
		t.Fatal("Hijack of a recorder succeeded")
	}
}

// The adaptive stage's admitted path, against BenchmarkMiddlewareLimiter.
func BenchmarkMiddlewareAdaptive(b *testing.B) {
	benchServe(b, mustNew(b, Options{
		Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 100, QueueLimit: 100, QueueTimeout: time.Second},
	}).Handler(trivial))
}

// Against BenchmarkMiddlewareLimiterTimeout.
func BenchmarkMiddlewareAdaptiveTimeout(b *testing.B) {
	benchServe(b, mustNew(b, Options{
		Timeout:  5 * time.Second,
		Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 100, QueueLimit: 100, QueueTimeout: time.Second},
	}).Handler(trivial))
}

// Invariant: a client that left is handed to the limiter as abandoned (it
// decides from how long the client waited), never ignored outright; a
// timeout stays a drop even when the client also left.
func TestAbandonedClientOutcome(t *testing.T) {
	for _, c := range []struct {
		res  result
		want resilience.LimitOutcome
	}{
		{result{completed: true, state: stateCommitted, status: 200, clientGone: true}, resilience.LimitAbandoned},
		{result{completed: true, state: stateOpen, clientGone: true}, resilience.LimitAbandoned},
		{result{completed: true, state: stateTimedOut, clientGone: true}, resilience.LimitDropped},
		{result{completed: true, state: stateCommitted, status: 404}, resilience.LimitIgnored},
		{result{completed: false, clientGone: true}, resilience.LimitIgnored},
	} {
		if got := c.res.outcome(); got != c.want {
			t.Errorf("%+v: %v, want %v", c.res, got, c.want)
		}
	}
}

// Invariant, through the HTTP middleware: clients that leave before twice
// the latency the adaptive limiter has learnt (users navigating away) do
// not lower its limit, however many there are; clients that leave after
// waiting far longer (the CPU-bound collapse, where every client times
// out) do. The core package checks the same of the limiter alone.
func TestAdaptiveLimitHoldsForClientsThatLeaveEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The CPU gate reads the real scheduler, not the bubble's clock:
		// left out, so that only the clients decide.
		m := mustNew(t, Options{Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 50, MinLimit: 2, IgnoreCPUWait: true}})
		var work atomic.Int64
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(time.Duration(work.Load())):
				w.Write([]byte("ok")) //nolint:errcheck
			case <-r.Context().Done():
			}
		}))
		// 200 requests a second for d, each served in service unless its
		// client leaves after leave (0: never); the limit at the end.
		load := func(d, service, leave time.Duration) int {
			work.Store(int64(service))
			var wg sync.WaitGroup
			for el := time.Duration(0); el < d; el += 5 * time.Millisecond {
				ctx, cancel := context.WithCancel(context.Background())
				if leave > 0 {
					time.AfterFunc(leave, cancel)
				}
				r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
				wg.Go(func() {
					defer cancel()
					defer func() {
						// A handler that returns without a word once its
						// client left has its connection aborted.
						if v := recover(); v != nil && v != http.ErrAbortHandler {
							panic(v)
						}
					}()
					h.ServeHTTP(httptest.NewRecorder(), r)
				})
				time.Sleep(5 * time.Millisecond)
			}
			wg.Wait()
			return m.Stats().Limit
		}
		// 200/s × 100 ms: 20 in flight, well under the limit.
		learnt := load(5*time.Second, 100*time.Millisecond, 0)
		if early := load(10*time.Second, 100*time.Millisecond, 50*time.Millisecond); early < learnt {
			t.Fatalf("limit fell from %d to %d for clients that left after 50 ms of a 100 ms service", learnt, early)
		}
		if late := load(10*time.Second, 5*time.Second, time.Second); late > learnt/2 {
			t.Fatalf("limit %d after 10 s of clients leaving after 1 s (learnt latency 100 ms), want at most %d", late, learnt/2)
		}
	})
}
