package resilienceecho_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	resilienceecho "github.com/ylcnfrht/resilience/adapters/echo"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// statusSink is a reusable ResponseWriter that keeps only the status.
type statusSink struct {
	h    http.Header
	code int
}

func (s *statusSink) Header() http.Header { return s.h }
func (s *statusSink) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
}
func (s *statusSink) Write(p []byte) (int, error) { s.WriteHeader(http.StatusOK); return len(p), nil }

// BenchmarkTimedRequest: a timed request answered in time, over HTTP/1
// (on the request's goroutine), over HTTP/2 (the chain on a worker, for a
// copy of the context), and over HTTP/2 under Router (the router
// detached, the middleware then runs as over HTTP/1).
func BenchmarkTimedRequest(b *testing.B) {
	mw, err := resilienceecho.New(inbound.Options{Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	e := echo.New()
	e.Use(mw.Handler)
	e.GET("/work/:id", func(c echo.Context) error { return c.String(http.StatusOK, c.Param("id")) })
	for _, bc := range []struct {
		name  string
		h     http.Handler
		major int
	}{
		{"HTTP1", e, 1},
		{"HTTP2", e, 2},
		{"HTTP2-Router", mw.Router(e), 2},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/work/7", nil)
			req.ProtoMajor = bc.major
			w := &statusSink{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				w.code = 0
				bc.h.ServeHTTP(w, req)
				if w.code != http.StatusOK {
					b.Fatalf("status %d", w.code)
				}
			}
		})
	}
}
