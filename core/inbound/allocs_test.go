//go:build !race

package inbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
	"unsafe"

	resilience "github.com/ylcnfrht/resilience/core"
)

// nopWriter is a ResponseWriter that allocates nothing.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) WriteHeader(int)             {}
func (w *nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// The view costs nothing until something reads it: a Priority function
// that never runs (a permit is free) adds no allocation to an admitted
// request, through Handler, Serve and Execute, with the fixed and the
// adaptive limiter. With the fixed limiter such a request allocates
// nothing at all; the adaptive limiter records the response status for
// its latency sample, one small writer per net/http request, with or
// without a Priority function. (Without the race detector, which
// allocates itself.)
func TestAdmittedFastPathAllocatesNothing(t *testing.T) {
	priority := func(context.Context) int {
		t.Error("the priority function ran with a free permit")
		return 0
	}
	limiters := []struct {
		name string
		opts func(priority func(context.Context) int) Options
		// httpAllocs is what an admitted net/http request allocates
		// without a Priority function.
		httpAllocs float64
	}{
		{"fixed", func(p func(context.Context) int) Options {
			return Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 10, QueueLimit: 10, Priority: p}}
		}, 0},
		{"adaptive", func(p func(context.Context) int) Options {
			return Options{Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 10, QueueLimit: 10, Priority: p}}
		}, 1}, // the status recorder
	}
	w := &nopWriter{h: http.Header{}}
	r := httptest.NewRequest("GET", "/users/7", nil)
	raw := &ginLike{next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	for _, l := range limiters {
		for _, withPriority := range []bool{false, true} {
			var p func(context.Context) int
			name := l.name + ", no priority"
			if withPriority {
				p, name = priority, l.name+", priority"
			}
			m := mustNew(t, l.opts(p))
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			if n := testing.AllocsPerRun(200, func() { h.ServeHTTP(w, r) }); n != l.httpAllocs {
				t.Errorf("%s: Handler allocates %v per admitted request, want %v", name, n, l.httpAllocs)
			}
			if n := testing.AllocsPerRun(200, func() {
				if err := m.serve(w, r, raw, continueGinLike); err != nil {
					t.Fatal(err)
				}
			}); n != l.httpAllocs {
				t.Errorf("%s: Serve allocates %v per admitted request, want %v", name, n, l.httpAllocs)
			}
			if n := testing.AllocsPerRun(200, func() { _ = m.execute(context.Background(), raw, nopFn) }); n != 0 {
				t.Errorf("%s: Execute allocates %v per admitted request, want 0", name, n)
			}
		}
	}
}

func nopFn(context.Context) error { return nil }

// BenchmarkMiddlewareAdmitted is the middleware's own cost on the path
// of a healthy server (a free permit), through a writer that costs
// nothing, so the figures are not the recorder's: compare each with
// "bare".
func BenchmarkMiddlewareAdmitted(b *testing.B) {
	limiter := func() *resilience.ConcurrencyLimiterOptions {
		return &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 100}
	}
	for _, bc := range []struct {
		name string
		opts *Options
	}{
		{"bare", nil},
		{"limiter", &Options{Concurrency: limiter()}},
		{"limiter-timeout", &Options{Concurrency: limiter(), Timeout: 5 * time.Second}},
		{"adaptive", &Options{Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 100, QueueLimit: 100}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var h http.Handler = trivial
			if bc.opts != nil {
				h = mustNew(b, *bc.opts).Handler(trivial)
			}
			w := &nopWriter{h: http.Header{}}
			r := httptest.NewRequest("GET", "/", nil)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
	}
}

// A timed handler that waits on its context, as one handing it to a
// database driver or an HTTP client does, under a parent that can end (a
// server's request context): it pays for the done channel and the watch
// on the parent that a handler ignoring its context does not.
func BenchmarkMiddlewareTimedHandlerWaits(b *testing.B) {
	waits := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		default:
		}
		trivial.ServeHTTP(w, r)
	})
	h := mustNew(b, Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 100},
		Timeout:     5 * time.Second,
	}).Handler(waits)
	w := &nopWriter{h: http.Header{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
}

// Execute under a timeout costs one allocation per request, the
// callback's deadline (its context and its place on the middleware's
// deadline list), for a callback that does not wait on its context: what
// a framework adapter on Execute (fiber, connect) adds over the untimed
// path, in line with Handler's timed path.
func TestExecuteTimedPathAllocations(t *testing.T) {
	m := mustNew(t, Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 10}, Timeout: 5 * time.Second})
	raw := &ginLike{next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	if n := testing.AllocsPerRun(200, func() { _ = m.execute(context.Background(), raw, nopFn) }); n != 1 {
		t.Errorf("Execute with a timeout allocates %v per admitted request, want 1", n)
	}
	// ExecuteInPlace costs the same: the deadline that times the
	// callback answers it directly, without a context.AfterFunc
	// registration per request.
	expired := func(error) {}
	if n := testing.AllocsPerRun(200, func() { _ = m.executeInPlace(context.Background(), raw, nopFn, expired) }); n != 1 {
		t.Errorf("ExecuteInPlace with a timeout allocates %v per admitted request, want 1", n)
	}
}

// A timed net/http request through Handler allocates once: the timed
// request, the handler's copy of the request inside it (a separate
// Request.WithContext allocation would be a second).
var okBody = []byte("ok")

func TestTimedHTTPRequestAllocatesOnce(t *testing.T) {
	m := mustNew(t, Options{Timeout: 5 * time.Second, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 10}})
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Context().Deadline(); !ok {
			t.Error("the handler's request carries no deadline")
		}
		_, _ = w.Write(okBody)
	}))
	w := &nopWriter{h: http.Header{}}
	r := httptest.NewRequest("GET", "/", nil)
	if n := testing.AllocsPerRun(200, func() { h.ServeHTTP(w, r) }); n != 1 {
		t.Errorf("a timed request allocates %v, want 1", n)
	}
}

// A timed net/http request is one allocation, its engine, its timed
// writer and the handler's copy of the request together: it must stay
// within the 512-byte size class (an object over 512 bytes carries an
// 8-byte malloc header and takes a slower allocation path). What only a
// request off the common path uses sits behind timing.rare, the copied
// field names in a recycled list, the answerer on the node's owner
// (answeredRequest), and a deadline list node keeps an int64.
func TestTimedRequestSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(timedRequest{}); n > 512 {
		t.Errorf("timedRequest is %d bytes, want at most 512 (the largest size class without a malloc header: every byte of it is allocated, cleared and collected per timed request)", n)
	}
}
