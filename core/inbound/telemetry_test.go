package inbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// A rejection is emitted in one place, core's, with the same fields
// whichever entry point and limiter: the reason and the time spent queued.
func TestRejectionEventCarriesQueueWait(t *testing.T) {
	const wait = 100 * time.Millisecond
	limiters := map[string]func(Options) Options{
		"fixed": func(o Options) Options {
			o.Concurrency = &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: wait}
			return o
		},
		"adaptive": func(o Options) Options {
			o.Adaptive = &resilience.AdaptiveLimiterOptions{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, QueueLimit: 1, QueueTimeout: wait}
			return o
		},
	}
	entries := map[string]func(m *Middleware, hold <-chan struct{}){
		"Handler": func(m *Middleware, hold <-chan struct{}) {
			m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hold })).
				ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		},
		"Execute": func(m *Middleware, hold <-chan struct{}) {
			_ = m.Execute(context.Background(), nil, func(context.Context) error { <-hold; return nil })
		},
	}
	for ln, lim := range limiters {
		for en, entry := range entries {
			t.Run(ln+"/"+en, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var mu sync.Mutex
					var events []resilience.Event
					m := mustNew(t, lim(Options{Name: "api", Listener: resilience.ListenerFunc(func(_ context.Context, e resilience.Event) {
						mu.Lock()
						events = append(events, e)
						mu.Unlock()
					})}))
					hold := make(chan struct{})
					go entry(m, hold) // takes the only permit
					synctest.Wait()
					entry(m, hold) // queues, then times out
					close(hold)
					synctest.Wait()
					mu.Lock()
					defer mu.Unlock()
					if len(events) != 1 {
						t.Fatalf("events %+v, want one rejection", events)
					}
					e := events[0]
					if e.Name != resilience.EventRateLimiterRejected || e.Reason != string(resilience.ReasonQueueTimeout) ||
						e.Duration != wait || e.Pipeline != "api" || e.Strategy == "" || e.Err == nil {
						t.Errorf("event %+v, want a queue-timeout rejection with Duration %v", e, wait)
					}
				})
			})
		}
	}
}
