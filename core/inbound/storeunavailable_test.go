package inbound

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// causeStore is a ratelimit.Store whose every take fails with err.
type causeStore struct{ err error }

func (s causeStore) Take(context.Context, string, ratelimit.Policy) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, s.err
}

// TestStoreFailedClosedIsNotRateLimited protects what an operator reads
// during a store outage: a limiter failing closed answers 503 and counts
// the request as storeUnavailable (in Stats and at the debug endpoint),
// never as rateLimited, which is for clients over their quota; failing
// open, the request runs and counts as admitted; either way the event
// carries the store's cause. A request whose context ended during the
// take is canceled, not an outage answer.
func TestStoreFailedClosedIsNotRateLimited(t *testing.T) {
	cause := &ratelimit.StoreError{Reason: ratelimit.StoreClusterDown, Err: errors.New("CLUSTERDOWN The cluster is down")}
	for _, closed := range []bool{false, true} {
		var causes []ratelimit.StoreReason
		m := mustNew(t, Options{
			RateLimit: &resilience.RateLimiterOptions{PermitLimit: 5, Window: time.Minute, Store: causeStore{cause}, FailClosed: closed},
			Listener: event.ListenerFunc(func(_ context.Context, e event.Event) {
				if e.Name == event.RateLimiterStoreError {
					causes = append(causes, ratelimit.ReasonOf(e.Err))
				}
			}),
		})
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		for range 3 {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			if want := map[bool]int{false: 200, true: 503}[closed]; w.Code != want {
				t.Fatalf("fail-closed %v: status %d, want %d", closed, w.Code, want)
			}
		}
		s := m.Stats()
		want := RequestCounts{Admitted: 3}
		if closed {
			want = RequestCounts{StoreUnavailable: 3}
		}
		if s.RequestCounts != want || s.Requests != 3 {
			t.Fatalf("fail-closed %v: counts %+v, want %+v", closed, s.RequestCounts, want)
		}
		if len(causes) != 3 || causes[0] != ratelimit.StoreClusterDown {
			t.Fatalf("fail-closed %v: event causes %v, want 3 × cluster-down", closed, causes)
		}
		w := httptest.NewRecorder()
		m.StatsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/debug/limits", nil))
		var got map[string]float64
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if got["storeUnavailable"] != float64(want.StoreUnavailable) || got["rateLimited"] != 0 {
			t.Fatalf("fail-closed %v: /debug/limits %v", closed, got)
		}
	}

	var c requestCounters
	c.rejected(&resilience.RateLimitStoreError{Policy: "api", Err: context.Canceled})
	c.rejected(&resilience.RateLimitStoreError{Policy: "api", Err: cause})
	c.rejected(&resilience.RateLimitRejectedError{RetryAfter: time.Second})
	if got := c.load(); got != (RequestCounts{Canceled: 1, StoreUnavailable: 1, RateLimited: 1}) {
		t.Fatalf("counts %+v", got)
	}
}
