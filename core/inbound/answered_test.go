package inbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Answered is true exactly when the middleware answered for the handler at
// its deadline, under its own timeout or a custom pipeline's upstream
// deadline: with the 504 while the response was open, or by cutting the
// committed one; false when the handler answered in time and for a writer
// Serve did not time.
func TestAnsweredReportsTheDeadlinesAnswer(t *testing.T) {
	limiter, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 4})
	if err != nil {
		t.Fatal(err)
	}
	pipeline, err := resilience.NewBuilder[struct{}]().AddStrategy(limiter).Build()
	if err != nil {
		t.Fatal(err)
	}
	timed := Options{Timeout: 20 * time.Millisecond}
	inTime := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }
	ignore := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	committed := func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("part"))
		http.NewResponseController(w).Flush() //nolint:errcheck // the recorder flushes
		<-r.Context().Done()
	}
	tests := []struct {
		name     string
		opts     Options
		upstream bool // the request carries a deadline of its own
		handler  http.HandlerFunc
		want     bool
		status   int
		cut      bool // Serve ends in http.ErrAbortHandler
	}{
		{"in time", timed, false, inTime, false, http.StatusNoContent, false},
		{"504 at the timeout", timed, false, ignore, true, http.StatusGatewayTimeout, false},
		{"committed, cut at the timeout", timed, false, committed, true, http.StatusOK, true},
		{"pipeline, 504 at an upstream deadline", Options{Pipeline: pipeline}, true, ignore, true, http.StatusGatewayTimeout, false},
		{"no timeout", Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4}}, false, inTime, false, http.StatusNoContent, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNew(t, tc.opts)
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			if tc.upstream {
				ctx, cancel := context.WithTimeout(req.Context(), 20*time.Millisecond)
				defer cancel()
				req = req.WithContext(ctx)
			}
			rec := httptest.NewRecorder()
			var got http.ResponseWriter
			var err error
			var panicked any
			func() {
				// A cut response ends in http.ErrAbortHandler, so that
				// net/http drops the connection.
				defer func() { panicked = recover() }()
				err = m.serve(rec, req, nil, func(w http.ResponseWriter, r *http.Request, _ any) {
					got = w
					tc.handler(w, r)
				})
			}()
			if err != nil || (panicked == http.ErrAbortHandler) != tc.cut {
				t.Fatalf("Serve returned %v, panicked %v", err, panicked)
			}
			if a := wasAnswered(got); a != tc.want || rec.Code != tc.status {
				t.Errorf("Answered %v, status %d; want %v, %d", a, rec.Code, tc.want, tc.status)
			}
		})
	}
	if wasAnswered(httptest.NewRecorder()) {
		t.Error("Answered is true for a writer Serve never gave out")
	}
}
