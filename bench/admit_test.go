package bench

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// discardWriter is a ResponseWriter that keeps nothing and allocates
// nothing, so BenchmarkAdmit measures the middleware alone: serve's
// recorder costs more than most middleware and its allocations make the
// figures noisy on a shared machine.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkAdmit runs every contender with a reused, discarding writer:
// the cost of admitting a request, without the recorder's.
func BenchmarkAdmit(b *testing.B) {
	for _, c := range allContenders() {
		b.Run(c.name, func(b *testing.B) {
			h := mustBuild(b, c)
			req := httptest.NewRequest(http.MethodGet, "/work", nil)
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, req)
			}
		})
	}
}
