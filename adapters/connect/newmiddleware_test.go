package resilienceconnect

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// Invariant: NewMiddleware is New in one call, as on every HTTP adapter:
// an invalid option is a *resilience.ConfigError naming it, and a valid
// one gives a middleware that serves and sheds like Handler.
func TestNewMiddleware(t *testing.T) {
	_, err := NewMiddleware(inbound.Options{Timeout: -1})
	var ce *resilience.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Options.Timeout" {
		t.Fatalf("negative timeout: %v, want a ConfigError naming Options.Timeout", err)
	}
	mw, err := NewMiddleware(inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/plain", nil))
	if rec.Code != http.StatusNoContent {
		t.Fatalf("status %d, want the handler's 204", rec.Code)
	}
}
