package resilienceotel

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// downStore fails every take as a Redis cluster without the key's master
// would.
type downStore struct{}

func (downStore) Take(context.Context, string, ratelimit.Policy) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, &ratelimit.StoreError{Reason: ratelimit.StoreClusterDown, Err: errors.New("CLUSTERDOWN")}
}

// TestStoreUnavailableResult protects what the dashboard and alerts read
// during a store outage with a fail-closed limiter: the 503s are
// resilience.requests{result="store-unavailable"}, not rate-limited, and
// each store-error event says its cause in resilience.store.reason.
func TestStoreUnavailableResult(t *testing.T) {
	h := newHarness(t)
	mw, err := inbound.New(inbound.Options{
		Name:      "api",
		RateLimit: &resilience.RateLimiterOptions{Name: "quota", PermitLimit: 6, Window: time.Hour, Store: downStore{}, FailClosed: true},
		Listener:  h.m,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.m.ObserveMiddleware("api", mw)()
	hd := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 4 {
		w := httptest.NewRecorder()
		hd.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("status %d, want 503", w.Code)
		}
	}
	ms := h.collect()
	got := sumByAttrs(t, ms, MetricRequests)
	if n := got["resilience.limiter.name=api,resilience.request.result="+ResultStoreUnavailable]; n != 4 {
		t.Errorf("store-unavailable = %d, want 4 (all: %v)", n, got)
	}
	if n := got["resilience.limiter.name=api,resilience.request.result="+ResultRateLimited]; n != 0 {
		t.Errorf("rate-limited = %d, want 0 (all: %v)", n, got)
	}
	ev := counts(t, ms)
	const want = "resilience.event.name=OnRateLimiterStoreError,resilience.outcome=error,resilience.pipeline.name=api,resilience.reason=fail-closed,resilience.store.reason=cluster-down,resilience.strategy.name=quota"
	if ev[want] != 4 {
		t.Errorf("resilience.events: %v, want {%s: 4}", ev, want)
	}
}
