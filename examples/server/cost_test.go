package main

import (
	"context"
	"net/http"
	"testing"
)

// GET /export costs 10 permits: with -permit-limit 10 and no queue, a
// /work beside a running export is refused with 503, and admitted with
// 200 once the export is done. The export is known to hold its permits
// when /debug/limits shows 10 in flight, not after a sleep.
func TestExportCostsTenPermits(t *testing.T) {
	s := startServer(t, "-permit-limit", "10", "-queue-limit", "0")
	export := s.async(context.Background(), "/export?ms=1500")
	waitFor(t, "the export to hold its 10 permits", func() bool {
		l := getLimits(t, s.client, s.url)
		return l["inflight"] == 10 && l["costly"] == 1
	})
	r := s.get(context.Background(), "/work?ms=10")
	wantRejection(t, r, http.StatusServiceUnavailable, "BULKHEAD_FULL", "full")
	if r := <-export; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("export: %d %v", r.status, r.err)
	}
	s.waitIdle(t)
	if r := s.get(context.Background(), "/work?ms=10"); r.err != nil || r.status != http.StatusOK {
		t.Fatalf("/work after the export: %d %v, want 200", r.status, r.err)
	}
}
