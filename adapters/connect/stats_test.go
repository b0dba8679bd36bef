package resilienceconnect_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestStatsHandler: StatsHandler serves the middleware's Stats as JSON,
// uncached, under the names every adapter's StatsHandler uses.
func TestStatsHandler(t *testing.T) {
	mw, err := resilienceconnect.New(inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 3}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mw.StatsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/limits", nil))
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Header().Get("Content-Type") != "application/json" ||
		rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("%q (%v): %v", rec.Body, rec.Header(), err)
	}
	if got["limit"] != 3.0 || got["inflight"] != 0.0 {
		t.Fatalf("got %v, want limit 3 and nothing in flight", got)
	}
}
