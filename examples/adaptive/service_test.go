package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// X-Priority maps to classes 0..9; anything else is the default class.
func TestRequestPriority(t *testing.T) {
	for _, c := range []struct {
		header string
		want   int
	}{{"0", 0}, {"9", 9}, {"3", 3}, {"", defaultPriority}, {"10", defaultPriority}, {"-1", defaultPriority}, {"high", defaultPriority}} {
		r := httptest.NewRequest("GET", "/work", nil)
		if c.header != "" {
			r.Header.Set("X-Priority", c.header)
		}
		ctx := inbound.HTTPRequest.With(context.Background(), &inbound.Request{Header: r.Header})
		if got := requestPriority(ctx); got != c.want {
			t.Errorf("X-Priority %q: priority %d, want %d", c.header, got, c.want)
		}
	}
}

// /debug/limits serves exactly the provider's values.
func TestLimitsHandler(t *testing.T) {
	l, err := resilience.NewAdaptiveLimiter(resilience.AdaptiveLimiterOptions{InitialLimit: 7})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := l.TryAcquire()
	defer p.Release(resilience.LimitIgnored)
	w := httptest.NewRecorder()
	limitsHandler(l).ServeHTTP(w, httptest.NewRequest("GET", "/debug/limits", nil))
	var got resilience.LimiterStats
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("body %q, content type %q: %v", w.Body, w.Header().Get("Content-Type"), err)
	}
	if got != (resilience.LimiterStats{Limit: 7, InFlight: 1}) {
		t.Fatalf("served %+v, want limit 7, in flight 1", got)
	}
}

// The simulated service is flat up to the knee and slower beyond; it
// stops when its context ends.
func TestWorkHandler(t *testing.T) {
	h := workHandler(1, time.Millisecond)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/work", nil))
	if w.Code != 200 || w.Body.String() != "done\n" {
		t.Fatalf("%d %q", w.Code, w.Body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/work", nil).WithContext(ctx))
	if w.Body.Len() != 0 {
		t.Fatalf("wrote %q after its context ended", w.Body)
	}
}
