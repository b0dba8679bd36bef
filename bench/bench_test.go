package bench

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/go-chi/chi/v5/middleware"
)

// Every contender gets the same generous configuration, so nothing is ever
// queued or rejected in these single-goroutine runs: the figures measure the
// cost of admitting a request, not of shedding one.
const (
	permitLimit  = 1000
	queueLimit   = 1000
	queueTimeout = 500 * time.Millisecond
	reqTimeout   = 5 * time.Second
)

var okBody = []byte("ok")

// trivial is the handler every middleware wraps: the smallest amount of work
// a real handler does, so the middleware's share is what varies.
var trivial = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Write(okBody)
})

// contender is one benchmarked stack. build returns the handler, or an error
// when the contender's configuration is rejected.
type contender struct {
	name  string
	build func() (http.Handler, error)
}

// peers are the stacks from other libraries plus the bare baseline; the
// project's own stacks are in inbound_test.go.
var peers = []contender{
	{"Bare", func() (http.Handler, error) { return trivial, nil }},
	{"ChiThrottleBacklog", func() (http.Handler, error) {
		return middleware.ThrottleBacklog(permitLimit, queueLimit, queueTimeout)(trivial), nil
	}},
	{"FailsafeBulkheadTimeout", func() (http.Handler, error) {
		bh := bulkhead.NewBuilder[*http.Response](permitLimit).WithMaxWaitTime(queueTimeout).Build()
		to := timeout.New[*http.Response](reqTimeout)
		// failsafe.With composes the first policy outermost: bulkhead, then
		// timeout, the same order as the inbound pipeline.
		return failsafehttp.NewHandler(trivial, bh, to), nil
	}},
}

// serve runs b.N requests through h, each with a fresh recorder, as a
// server would see them one after another.
func serve(b *testing.B, h http.Handler) {
	b.Helper()
	req := httptest.NewRequest(http.MethodGet, "/work", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d, want 200: the benchmark must not measure rejections", rec.Code)
		}
	}
}

func mustBuild(b *testing.B, c contender) http.Handler {
	b.Helper()
	h, err := c.build()
	if err != nil {
		b.Fatalf("%s: %v", c.name, err)
	}
	return h
}

func BenchmarkBare(b *testing.B)               { serve(b, mustBuild(b, peers[0])) }
func BenchmarkChiThrottleBacklog(b *testing.B) { serve(b, mustBuild(b, peers[1])) }
func BenchmarkFailsafeBulkheadTimeout(b *testing.B) {
	serve(b, mustBuild(b, peers[2]))
}

// TestContendersAdmit protects the benchmarks' premise: every stack, as
// configured here, answers a plain request with the handler's own 200 and
// body, so no figure is the cost of a rejection path.
func TestContendersAdmit(t *testing.T) {
	for _, c := range allContenders() {
		t.Run(c.name, func(t *testing.T) {
			h, err := c.build()
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/work", nil))
			if rec.Code != http.StatusOK || rec.Body.String() != "ok" {
				t.Fatalf("got %d %q, want 200 \"ok\"", rec.Code, rec.Body.String())
			}
		})
	}
}
