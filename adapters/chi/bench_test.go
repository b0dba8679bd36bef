package resiliencechi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"

	"github.com/ylcnfrht/resilience/adapters/chi"
)

// BenchmarkAdmitted measures a request admitted at once through a chi
// router, with the adapter and a Priority function (which never runs: a
// permit is free), beside the bare router, chi's own ThrottleBacklog and
// the adapter without a Priority function. The difference to "bare" is
// the middleware's cost on the path every request of a healthy server
// takes.
func BenchmarkAdmitted(b *testing.B) {
	limiter := func(priority bool) inbound.Options {
		c := &resilience.ConcurrencyLimiterOptions{PermitLimit: 1000, QueueLimit: 1000, QueueTimeout: 500 * time.Millisecond}
		if priority {
			c.Priority = func(context.Context) int { return 0 }
		}
		return inbound.Options{Concurrency: c}
	}
	adapter := func(opts inbound.Options) func(b *testing.B) func(http.Handler) http.Handler {
		return func(b *testing.B) func(http.Handler) http.Handler {
			mw, err := resiliencechi.NewMiddleware(opts)
			if err != nil {
				b.Fatal(err)
			}
			return mw
		}
	}
	for _, bc := range []struct {
		name string
		mw   func(b *testing.B) func(http.Handler) http.Handler
	}{
		{"bare", nil},
		{"chi-throttle-backlog", func(*testing.B) func(http.Handler) http.Handler {
			return middleware.ThrottleBacklog(1000, 1000, 500*time.Millisecond)
		}},
		{"adapter-limiter", adapter(limiter(false))},
		{"adapter-limiter-priority", adapter(limiter(true))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := chi.NewRouter()
			if bc.mw != nil {
				r.Use(bc.mw(b))
			}
			r.Get("/users/{id}", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
			req := httptest.NewRequest(http.MethodGet, "/users/7", nil)
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d", w.Code)
			}
			// A reused writer that keeps nothing: the recorder would cost
			// more than the middleware and make the figures noisy.
			d := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				r.ServeHTTP(d, req)
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps nothing and allocates
// nothing.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
