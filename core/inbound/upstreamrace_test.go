package inbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// An upstream deadline earlier than the timeout is watched (timing.rare
// gets the watch after the deadline is armed) while that deadline may
// already be answering the request: the answer must not read what arm is
// still setting up. Run under the race detector, which reported it when
// pass read timing.rare; many requests with deadlines that pass at once
// make the overlap likely.
func TestUpstreamDeadlineAnsweredWhileArmed(t *testing.T) {
	m := mustNew(t, Options{Timeout: 5 * time.Second})
	h := m.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Microsecond)
			defer cancel()
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil).WithContext(ctx))
			if w.Code != http.StatusGatewayTimeout {
				t.Errorf("status %d at an upstream deadline, want 504", w.Code)
			}
		}()
	}
	wg.Wait()
}
