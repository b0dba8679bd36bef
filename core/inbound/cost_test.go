package inbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// exportCost is a Cost function: /export costs 10, anything else 1.
func exportCost(ctx context.Context) int {
	if r, _ := RequestFrom(ctx); r.Path == "/export" {
		return 10
	}
	return 1
}

// An export costing the whole limit holds every permit while it runs: a
// read beside it is refused with the limiter's 503, and admitted once it
// returns; the limiter counts its 10 permits.
func TestCostExportHoldsItsPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustNew(t, Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 10, Cost: exportCost}})
		release := make(chan struct{})
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/export" {
				<-release
			}
		}))
		export := httptest.NewRecorder()
		go h.ServeHTTP(export, httptest.NewRequest("GET", "/export", nil))
		synctest.Wait()
		if s := m.Stats(); s.InFlight != 10 || s.Costly != 1 {
			t.Fatalf("during an export: in flight %d, costly %d; want its cost 10, one costly", s.InFlight, s.Costly)
		}
		read := httptest.NewRecorder()
		h.ServeHTTP(read, httptest.NewRequest("GET", "/work", nil))
		if read.Code != http.StatusServiceUnavailable {
			t.Fatalf("a read beside the export: %d, want 503", read.Code)
		}
		close(release)
		synctest.Wait()
		if export.Code != http.StatusOK {
			t.Fatalf("export: %d", export.Code)
		}
		read = httptest.NewRecorder()
		h.ServeHTTP(read, httptest.NewRequest("GET", "/work", nil))
		if read.Code != http.StatusOK {
			t.Fatalf("a read after the export: %d, want 200", read.Code)
		}
		if s := m.Stats(); s.InFlight != 0 || s.Costly != 0 {
			t.Fatalf("at the end: in flight %d, costly %d", s.InFlight, s.Costly)
		}
	})
}

// A costly request that must queue waits at the head for its permits; the
// read queued behind it waits too, and both run in turn.
func TestCostQueuedExportHeadOfLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustNew(t, Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 10, QueueLimit: 4, QueueTimeout: time.Minute, Cost: exportCost}})
		gates := map[string]chan struct{}{"/work": make(chan struct{}), "/export": make(chan struct{})}
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-gates[r.URL.Path] }))
		serve := func(path string) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			go h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			synctest.Wait()
			return rec
		}
		serve("/work") // holds 1
		serve("/export")
		serve("/work")
		if s := m.Stats().LimiterStats; s.InFlight != 1 || s.Queued != 2 {
			t.Fatalf("Stats = %+v, want 1 in flight and the export and a read queued (9 permits free)", s)
		}
		close(gates["/work"]) // the first read returns; the export takes all 10
		synctest.Wait()
		if s := m.Stats(); s.InFlight != 10 || s.Queued != 1 || s.Costly != 1 {
			t.Fatalf("Stats = %+v, want the export's 10 in flight (one costly), the read queued", s)
		}
		close(gates["/export"])
		synctest.Wait()
		if s := m.Stats().LimiterStats; s.InFlight != 0 || s.Queued != 0 {
			t.Fatalf("Stats at the end = %+v", s)
		}
	})
}

// The rate limit takes a request's cost from its key's quota.
func TestCostRateLimit(t *testing.T) {
	m := mustNew(t, Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 12, Window: time.Hour, Cost: exportCost}})
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i, want := range []struct {
		path      string
		code      int
		remaining string
	}{{"/export", 200, "2"}, {"/export", 429, "2"}, {"/work", 200, "1"}, {"/work", 200, "0"}, {"/work", 429, "0"}} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", want.path, nil))
		if rec.Code != want.code || rec.Header().Get("RateLimit-Remaining") != want.remaining {
			t.Fatalf("request %d (%s): %d, remaining %q; want %d, %q", i, want.path, rec.Code, rec.Header().Get("RateLimit-Remaining"), want.code, want.remaining)
		}
	}
}

// A Cost function that panics costs its request 1 and is reported.
func TestCostPanicCostsOne(t *testing.T) {
	var events shadowEvents
	m := mustNew(t, Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2, Cost: func(context.Context) int { panic("cost") }},
		Listener:    &events,
	})
	inFlight := -1
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { inFlight = m.Stats().InFlight }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusOK || inFlight != 1 {
		t.Fatalf("%d with %d in flight, want 200 with 1", rec.Code, inFlight)
	}
	if events.count(event.HookPanic, event.HookCost) != 1 {
		t.Fatal("the Cost function's panic was not reported")
	}
}

// The rate limit's Cost function is contained as well: a panic takes one
// token.
func TestRateCostPanicCostsOne(t *testing.T) {
	var events shadowEvents
	m := mustNew(t, Options{
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 5, Window: time.Hour, Cost: func(context.Context) int { panic("cost") }},
		Listener:  &events,
	})
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("RateLimit-Remaining") != "4" {
		t.Fatalf("%d, remaining %q; want 200 with one token taken", rec.Code, rec.Header().Get("RateLimit-Remaining"))
	}
	if events.count(event.HookPanic, event.HookCost) != 1 {
		t.Fatal("the Cost function's panic was not reported")
	}
}
