package inbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// TestRequestCountsAddUpToRequestsSent protects the denominator of every
// share an operator computes: each request counts once, in the field of
// how it ended, whatever the path (fast path, queue, rejection, deadline,
// drain), so the counts add up to the requests sent.
func TestRequestCountsAddUpToRequestsSent(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(o *Options)
	}{
		{"fixed", func(o *Options) {
			o.Concurrency = &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: 50 * time.Millisecond}
		}},
		{"adaptive", func(o *Options) {
			o.Adaptive = &resilience.AdaptiveLimiterOptions{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, QueueLimit: 1, QueueTimeout: 50 * time.Millisecond}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { checkRequestCounts(t, tc.opts) })
		})
	}
}

func checkRequestCounts(t *testing.T, configure func(o *Options)) {
	opts := Options{
		Timeout:   100 * time.Millisecond,
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 6, Window: time.Hour},
	}
	configure(&opts)
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hold": // ignores its context: late after its 504
			<-release
		case "/slow": // watches its context: ends at the deadline
			<-r.Context().Done()
		}
	}))
	var wg sync.WaitGroup
	codes := make(map[int]int)
	var mu sync.Mutex
	send := func(path string) {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			mu.Lock()
			codes[rec.Code]++
			mu.Unlock()
		})
	}
	sent := 0
	send("/ok") // admitted
	sent++
	synctest.Wait()
	send("/slow") // 504 at the deadline: timed out
	sent++
	synctest.Wait()
	time.Sleep(150 * time.Millisecond)
	synctest.Wait()
	send("/hold") // holds the one permit, late after 100 ms
	sent++
	synctest.Wait()
	send("/ok") // queues, then queue-timeout at 50 ms
	sent++
	synctest.Wait()
	send("/ok") // the queue is full: full
	sent++
	synctest.Wait()
	time.Sleep(120 * time.Millisecond) // past the queue timeout and the hold's deadline
	synctest.Wait()
	close(release) // the late handler returns its permit
	synctest.Wait()
	send("/ok") // admitted
	sent++
	synctest.Wait()
	send("/ok") // the seventh request: rate limited
	sent++
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := m.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	send("/ok") // shutting down
	sent++
	wg.Wait()

	got := m.Stats().RequestCounts
	want := RequestCounts{Admitted: 2, TimedOut: 2, RateLimited: 1, Full: 1, QueueTimeout: 1, ShuttingDown: 1}
	if got != want {
		t.Errorf("Stats().RequestCounts = %+v, want %+v (responses %v)", got, want, codes)
	}
	if got.sum() != uint64(sent) {
		t.Errorf("sum = %d, want the %d requests sent", got.sum(), sent)
	}
}

// TestRequestCountsPlainFastPath: a limiter alone takes the shortcut that
// builds no call; its requests count too.
func TestRequestCountsPlainFastPath(t *testing.T) {
	m, err := New(Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4}})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}
	if err := m.execute(context.Background(), nil, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := m.Stats().RequestCounts; got != (RequestCounts{Admitted: 4}) {
		t.Errorf("Stats().RequestCounts = %+v, want 4 admitted", got)
	}
}

// TestRequestCountsExecuteTimedOut: Execute's timeout counts as timed
// out, whatever the callback returned.
func TestRequestCountsExecuteTimedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := New(Options{Timeout: 10 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4}})
		if err != nil {
			t.Fatal(err)
		}
		err = m.execute(context.Background(), nil, func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		})
		if err == nil {
			t.Fatal("Execute past its timeout returned nil")
		}
		synctest.Wait()
		if got := m.Stats().RequestCounts; got != (RequestCounts{TimedOut: 1}) {
			t.Errorf("Stats().RequestCounts = %+v, want 1 timed out", got)
		}
	})
}

// TestPanickingHandlerCountedOnce protects the same sum for handlers that
// panic: a panic before the deadline counts once in Panicked, one after
// its 504 went out in TimedOut (the client got a 504), on the net/http
// middleware, Execute and a custom pipeline, with and without
// AnswerPanics, and the permit comes back every time.
func TestPanickingHandlerCountedOnce(t *testing.T) {
	pipeline, err := resilience.NewBuilder[struct{}]().Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"fixed", Options{Timeout: time.Second, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}},
		{"fixed-untimed", Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}},
		{"adaptive", Options{Timeout: time.Second, Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 1, MinLimit: 1, MaxLimit: 1}}},
		{"no-limiter", Options{Timeout: time.Second}},
		{"answer-panics", Options{Timeout: time.Second, AnswerPanics: true, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}},
		{"pipeline", Options{Pipeline: pipeline}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
			func() {
				defer func() { _ = recover() }()
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
			}()
			func() {
				defer func() { _ = recover() }()
				_ = m.execute(context.Background(), nil, func(context.Context) error { panic("boom") })
			}()
			c := m.Stats().RequestCounts
			if c.Panicked != 2 || c.sum() != 2 {
				t.Fatalf("counts %+v: want Panicked 2 of 2 requests", c)
			}
			if s := m.Stats(); s.InFlight != 0 {
				t.Fatalf("in flight %d after the panics: a permit was lost", s.InFlight)
			}
		})
	}
	t.Run("after-504", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, err := New(Options{Timeout: 100 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
			if err != nil {
				t.Fatal(err)
			}
			h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				time.Sleep(time.Second) // ignores its context: late after its 504
				panic("late")
			}))
			rec := httptest.NewRecorder()
			func() {
				defer func() { _ = recover() }()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			}()
			c := m.Stats().RequestCounts
			if rec.Code != http.StatusGatewayTimeout || c.TimedOut != 1 || c.sum() != 1 {
				t.Fatalf("status %d, counts %+v: want the 504 counted in TimedOut, once", rec.Code, c)
			}
		})
	})
}
