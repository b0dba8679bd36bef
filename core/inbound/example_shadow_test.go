package inbound_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// Try a rate limit in shadow before enforcing it: every request is
// served, and the ones it would have refused are counted. Then enforce
// it while serving: Reconfigure the options in force with the shares at
// 0 (a ramp goes through 50 first).
func ExampleShadow() {
	m, err := inbound.New(inbound.Options{
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 2, Window: time.Minute},
		Shadow:    inbound.Shadow{RateLimit: 100}, // a dry run: enforce none
	})
	if err != nil {
		panic(err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 5 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		fmt.Println(w.Code)
	}
	s := m.Stats()
	fmt.Printf("rate-limited %d, would have been %d\n", s.RateLimited, s.Shadow.RateLimited)

	next := m.Options()
	next.Shadow = inbound.Shadow{} // enforce every decision
	if err := m.Reconfigure(next); err != nil {
		panic(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	fmt.Println(w.Code, "shadow share now", m.Stats().Config.ShadowRateLimit)
	// Output:
	// 200
	// 200
	// 200
	// 200
	// 200
	// rate-limited 0, would have been 3
	// 429 shadow share now 0
}
