package inbound

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// shadowEvents records the events of a middleware by name and reason.
type shadowEvents struct {
	mu  sync.Mutex
	got map[string]int
}

func (e *shadowEvents) OnEvent(_ context.Context, ev event.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.got == nil {
		e.got = map[string]int{}
	}
	e.got[string(ev.Name)+"/"+ev.Reason]++
}

func (e *shadowEvents) count(name event.Name, reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.got[string(name)+"/"+reason]
}

// A concurrency limiter in shadow lets every request run, permit or not,
// and counts those it would have refused (over the limit and the queue)
// and queued, by the queue's size; the limiter's InFlight stays within
// its limit and the rest show as Over while they run. Nothing is
// enforced: every request is admitted and counted so.
func TestShadowConcurrencyCountsWouldBeRefusalsAndRunsAll(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		queue                int
		wantQueued, wantFull uint64
	}{
		{"no queue", 0, 0, 8},
		{"queue of 3", 3, 3, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var events shadowEvents
				m := mustNew(t, Options{
					Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2, QueueLimit: tc.queue, QueueTimeout: time.Second},
					Shadow:      Shadow{Concurrency: 100},
					Listener:    &events,
				})
				release := make(chan struct{})
				var during Stats
				h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
				codes := make([]int, 10)
				var wg sync.WaitGroup
				for i := range 10 {
					wg.Go(func() {
						w := httptest.NewRecorder()
						h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
						codes[i] = w.Code
					})
				}
				synctest.Wait()
				during = m.Stats()
				close(release)
				wg.Wait()
				for i, c := range codes {
					if c != http.StatusOK {
						t.Fatalf("request %d: %d, want 200: nothing is enforced in shadow", i, c)
					}
				}
				if during.InFlight != 2 || during.Shadow.Over != 8 {
					t.Errorf("while running: in flight %d, over %d; want 2 (the limit) and 8", during.InFlight, during.Shadow.Over)
				}
				s := m.Stats()
				if s.Shadow.Queued != tc.wantQueued || s.Shadow.Full != tc.wantFull || s.Shadow.Over != 0 {
					t.Errorf("shadow counts %+v, want queued %d, full %d, over 0", s.Shadow, tc.wantQueued, tc.wantFull)
				}
				if s.Admitted != 10 || s.Requests != 10 || s.Full != 0 {
					t.Errorf("request counts %+v, want 10 admitted, nothing refused", s.RequestCounts)
				}
				if got := events.count(event.ShadowDecision, "full"); uint64(got) != tc.wantFull {
					t.Errorf("%d shadow events for full, want %d", got, tc.wantFull)
				}
				if got := events.count(event.ConcurrencyLimiterRejected, "full"); got != 0 {
					t.Errorf("%d rejection events: a shadow decision must not look enforced", got)
				}
			})
		})
	}
}

// A rate limit in shadow takes its tokens as when enforcing and counts
// the refusals it did not send, with a shadow event instead of a
// rejection; every request is served.
func TestShadowRateLimitCountsRefusalsNotSent(t *testing.T) {
	var events shadowEvents
	m := mustNew(t, Options{
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 2, Window: time.Hour},
		Shadow:    Shadow{RateLimit: 100},
		Listener:  &events,
	})
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i := range 5 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: %d, want 200", i, w.Code)
		}
	}
	s := m.Stats()
	if s.Shadow.RateLimited != 3 || s.RateLimited != 0 || s.Admitted != 5 {
		t.Errorf("shadow %+v, counts %+v: want 3 would-be 429s, none sent, 5 admitted", s.Shadow, s.RequestCounts)
	}
	if events.count(event.ShadowDecision, event.ReasonRateLimited) != 3 || events.count(event.RateLimiterRejected, event.ReasonRateLimited) != 0 {
		t.Errorf("events %v, want 3 shadow decisions and no rejection", events.got)
	}
}

// A timeout in shadow leaves the handler's context alone and its
// response the handler's, and counts the request when its deadline
// passes, not when it returns.
func TestShadowTimeoutCountsAtTheDeadlineWithout504(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustNew(t, Options{Timeout: 50 * time.Millisecond, Shadow: Shadow{Timeout: 100}})
		release := make(chan struct{})
		var ctxErr error
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release
			ctxErr = r.Context().Err()
			_, _ = w.Write([]byte("late but mine"))
		}))
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		}()
		time.Sleep(100 * time.Millisecond) // the fake clock: past the deadline
		synctest.Wait()
		if got := m.Stats().Shadow.TimedOut; got != 1 {
			t.Errorf("before the handler returns: shadow timedOut %d, want 1", got)
		}
		close(release)
		<-done
		if w.Code != http.StatusOK || w.Body.String() != "late but mine" || ctxErr != nil {
			t.Errorf("got %d %q ctx %v, want the handler's 200 and its context alive", w.Code, w.Body, ctxErr)
		}
		s := m.Stats()
		if s.TimedOut != 0 || s.Admitted != 1 || s.Shadow.TimedOut != 1 {
			t.Errorf("counts %+v shadow %+v, want 1 admitted and 1 would-be timeout", s.RequestCounts, s.Shadow)
		}
	})
}

// A share between 0 and 100 enforces about that share of the decisions,
// drawn per request: a ramp.
func TestShadowShareEnforcesPart(t *testing.T) {
	m := mustNew(t, Options{
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Hour},
		Shadow:    Shadow{RateLimit: 50},
	})
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	const n = 2000
	for range n {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}
	s := m.Stats()
	// n-1 refusals: about half sent, half counted in shadow. The bounds
	// are far from what a fair draw gives (about 6 standard deviations).
	if s.RateLimited+s.Shadow.RateLimited != n-1 || s.RateLimited < 800 || s.RateLimited > 1200 {
		t.Errorf("sent %d, in shadow %d of %d refusals: want about half each", s.RateLimited, s.Shadow.RateLimited, n-1)
	}
}

// A share outside 0..100 is refused, naming the field; shadowing the
// concurrency stage of a custom pipeline is refused too.
func TestShadowOptionsValidated(t *testing.T) {
	p, err := resilience.NewBuilder[struct{}]().Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts  Options
		field string
	}{
		{Options{Shadow: Shadow{Timeout: 101}}, "Options.Shadow.Timeout"},
		{Options{Shadow: Shadow{RateLimit: -1}}, "Options.Shadow.RateLimit"},
		{Options{Shadow: Shadow{Concurrency: 10}, Pipeline: p}, "Options.Shadow.Concurrency"},
	} {
		_, err := New(tc.opts)
		var ce *resilience.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: got %v, want a ConfigError for %s", tc.opts.Shadow, err, tc.field)
		}
	}
}
