package inbound

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	resilience "github.com/ylcnfrht/resilience/core"
)

// The debug endpoint serves the numbers under their stable JSON names.
func TestStatsHandler(t *testing.T) {
	m := mustNew(t, Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 3}})
	held, _ := m.Limiter().TryAcquire()
	defer held.Release()
	w := httptest.NewRecorder()
	m.StatsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/debug/limits", nil))
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"limit": 3.0, "inflight": 1.0, "queued": 0.0, "late": 0.0, "lateTotal": 0.0}
	for _, k := range []string{"requests", "admitted", "timedOut", "rateLimited", "storeUnavailable", "full", "queueTimeout", "dropped", "shuttingDown", "canceled", "panicked"} {
		want[k] = 0.0 // every value a plain number, as clients decode it
	}
	if len(got) != len(want) || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if s := mustNew(t, Options{}).Stats(); s != (Stats{}) {
		t.Fatalf("no limiter: %+v", s)
	}
}
