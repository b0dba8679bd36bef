package main

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ylcnfrht/resilience/examples/overload/lab"
)

// Every contender but the pass-through and the untuned adaptive limiters
// (whose initial limits are their own, not the knobs') answers 200 when
// idle and
// refuses a request, with 503 or 429, while its one permit is held: the
// lab's shed column counts exactly those statuses.
func TestContendersShedWhenFull(t *testing.T) {
	k := lab.Knobs{Limit: 1, Queue: 0, QueueTimeout: 10 * time.Millisecond, Rate: 1}
	for _, c := range contenders() {
		switch c.Name {
		case "none", "adaptive", "adaptive-codel", "adaptive-queue", "adaptive-fair", "adaptive-codel-fair", "failsafe-adaptive":
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			mw, err := c.New(k)
			if err != nil {
				t.Fatal(err)
			}
			hold, held := make(chan struct{}), make(chan struct{})
			h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/hold" {
					close(held)
					<-hold
				}
			}))
			var wg sync.WaitGroup
			first := httptest.NewRecorder()
			wg.Go(func() { h.ServeHTTP(first, httptest.NewRequest("GET", "/hold", nil)) })
			<-held
			second := httptest.NewRecorder()
			h.ServeHTTP(second, httptest.NewRequest("GET", "/", nil))
			close(hold)
			wg.Wait()
			if first.Code != http.StatusOK {
				t.Errorf("first request: %d, want 200", first.Code)
			}
			if second.Code != http.StatusServiceUnavailable && second.Code != http.StatusTooManyRequests {
				t.Errorf("request while full: %d, want 503 or 429", second.Code)
			}
		})
	}
}
