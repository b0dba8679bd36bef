package resilienceconnect_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// benchmarkRejection measures calls the middleware refuses before the
// handler runs, in the protocol contentType names: the per-call cost of
// mapping the refusal and writing it.
func benchmarkRejection(b *testing.B, opts inbound.Options, contentType string, hold bool) {
	mw, err := resilienceconnect.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	release, entered := make(chan struct{}), make(chan struct{})
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-entered:
		default:
			close(entered)
			<-release
		}
	}))
	newReq := func() *http.Request {
		req := httptest.NewRequest(http.MethodPost, sayProcedure, bytes.NewReader(sayBody))
		req.Header.Set("Content-Type", contentType)
		return req
	}
	done := make(chan struct{})
	if hold { // one call keeps the only permit
		go func() { defer close(done); h.ServeHTTP(httptest.NewRecorder(), newReq()) }()
		<-entered
	} else { // one call spends the only token
		close(entered)
		close(done)
		h.ServeHTTP(httptest.NewRecorder(), newReq())
	}
	defer func() {
		if hold {
			close(release)
		}
		<-done
	}()
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, newReq())
		if rec.Code == http.StatusOK && rec.Header().Get("Grpc-Status") == "" && rec.Header().Get("Grpc-Retry-Pushback-Ms") == "" {
			b.Fatalf("a call was admitted: the benchmark must measure rejections")
		}
	}
}

func BenchmarkRejectionCapacityConnect(b *testing.B) {
	benchmarkRejection(b, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, "application/proto", true)
}

func BenchmarkRejectionCapacityGRPC(b *testing.B) {
	benchmarkRejection(b, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, "application/grpc", true)
}

func BenchmarkRejectionRateLimitedConnect(b *testing.B) {
	benchmarkRejection(b, inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Hour}}, "application/proto", false)
}

func BenchmarkRejectionRateLimitedGRPC(b *testing.B) {
	benchmarkRejection(b, inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Hour}}, "application/grpc", false)
}
