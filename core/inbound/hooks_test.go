package inbound

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// hookEvents records the event.HookPanic events a middleware emits.
type hookEvents struct {
	mu     sync.Mutex
	events []event.Event
}

func (h *hookEvents) listener() event.Listener {
	return event.ListenerFunc(func(_ context.Context, e event.Event) {
		if e.Name == event.HookPanic {
			h.mu.Lock()
			h.events = append(h.events, e)
			h.mu.Unlock()
		}
	})
}

// expect checks that exactly one event.HookPanic was emitted, for hook,
// carrying the hook's own value.
func (h *hookEvents) expect(t *testing.T, hook string, value any) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	var hp *resilience.HookPanicError
	if len(h.events) != 1 || h.events[0].Reason != hook || !errors.As(h.events[0].Err, &hp) || hp.Value != value {
		t.Fatalf("events %+v, want one %s for %s with %v", h.events, event.HookPanic, hook, value)
	}
}

// badRequest marks the requests whose hooks panic.
const badRequest = "X-Bad"

// A user's Priority, Flow, FlowWeight or Key function that panics gives its request an
// ordinary answer, the same on every adapter: a panicking Priority ranks
// the request last (it queues behind the healthy waiter and is served
// after it), a panicking Key counts it against PanickedKey (served within
// that quota). The panic is reported as event.HookPanic, and the requests
// around it (one holding the permit, one queued) are served as if nothing
// happened, with every permit and queue place back at the end.
func TestRequestHookPanicStaysInItsRequest(t *testing.T) {
	panicky := func(ctx context.Context, hook string) {
		if r, ok := RequestFrom(ctx); ok && r.Header.Get(badRequest) != "" {
			panic(hook + " bug")
		}
	}
	cases := []struct {
		hook  string
		queue bool // the hook runs for a request that must queue
		opts  func(lis event.Listener) Options
	}{
		{event.HookPriority, true, func(lis event.Listener) Options {
			return Options{Listener: lis, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 2,
				Priority: func(ctx context.Context) int { panicky(ctx, event.HookPriority); return 0 }}}
		}},
		{event.HookPriority + " (adaptive)", true, func(lis event.Listener) Options {
			return Options{Listener: lis, Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, QueueLimit: 2,
				Priority: func(ctx context.Context) int { panicky(ctx, event.HookPriority); return 0 }}}
		}},
		{event.HookFlow, true, func(lis event.Listener) Options {
			return Options{Listener: lis, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 2,
				Flow: func(ctx context.Context) string { panicky(ctx, event.HookFlow); return "tenant" }}}
		}},
		{event.HookFlowWeight, true, func(lis event.Listener) Options {
			return Options{Listener: lis, Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, QueueLimit: 2,
				Flow:       func(context.Context) string { return "tenant" },
				FlowWeight: func(ctx context.Context) int { panicky(ctx, event.HookFlowWeight); return 2 }}}
		}},
		{event.HookKey, false, func(lis event.Listener) Options {
			return Options{Listener: lis, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 2},
				RateLimit: &resilience.RateLimiterOptions{PermitLimit: 100, Window: time.Hour,
					Key: func(ctx context.Context) string { panicky(ctx, event.HookKey); return "k" }}}
		}},
	}
	for _, c := range cases {
		t.Run(c.hook, func(t *testing.T) {
			hook := c.hook
			if strings.HasPrefix(hook, event.HookPriority) {
				hook = event.HookPriority // the adaptive variant's name
			}
			var ev hookEvents
			m := mustNew(t, c.opts(ev.listener()))
			release := make(chan struct{})
			var once sync.Once
			open := func() { once.Do(func() { close(release) }) }
			srv := httptest.NewUnstartedServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/held" {
					<-release
				}
				io.WriteString(w, "ok")
			})))
			srv.Config.ErrorLog = log.New(io.Discard, "", 0) // net/http logs the request's panic
			srv.Start()
			defer srv.Close()
			defer open()
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			held := goGet(client, srv.URL+"/held")
			pollFor(t, "the permit held", func() bool { return m.Stats().InFlight == 1 })
			var queued <-chan answer
			if c.queue {
				queued = goGet(client, srv.URL+"/ok")
				pollFor(t, "a healthy request queued", func() bool { return m.Stats().Queued == 1 })
			}
			req, _ := http.NewRequest("GET", srv.URL+"/ok", nil)
			req.Header.Set(badRequest, "1")
			bad := make(chan answer, 1)
			go func() {
				resp, err := client.Do(req)
				if err != nil {
					bad <- answer{err: err}
					return
				}
				resp.Body.Close()
				bad <- answer{status: resp.StatusCode}
			}()
			if c.queue {
				pollFor(t, "the request with the panicking hook queued", func() bool { return m.Stats().Queued == 2 })
			}
			pollFor(t, "the hook's panic reported", func() bool { ev.mu.Lock(); defer ev.mu.Unlock(); return len(ev.events) > 0 })
			ev.expect(t, hook, hook+" bug")
			open()
			if a := <-held; a.err != nil || a.status != 200 {
				t.Fatalf("the request holding the permit: %+v, want its 200", a)
			}
			if queued != nil {
				if a := <-queued; a.err != nil || a.status != 200 {
					t.Fatalf("the healthy queued request: %+v, want 200", a)
				}
			}
			if a := <-bad; a.err != nil || a.status != 200 {
				t.Fatalf("the request whose %s panicked: %+v, want 200", hook, a)
			}
			if a := get(client, srv.URL+"/ok"); a.err != nil || a.status != 200 {
				t.Fatalf("a later request: %+v, want 200", a)
			}
			pollFor(t, "idle", func() bool { s := m.Stats(); return s.InFlight == 0 && s.Queued == 0 })
		})
	}
}

// An adaptive limiter's Classifier that panics, on a request admitted at
// once through Execute (the middleware classifies it itself), leaves that
// request's answer alone (Execute returns the handler's own error), is
// reported as event.HookPanic, and returns the permit.
func TestClassifierPanicStaysInItsRequest(t *testing.T) {
	var ev hookEvents
	failed := errors.New("the handler failed")
	m := mustNew(t, Options{Listener: ev.listener(), Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 1, MinLimit: 1, MaxLimit: 1,
		Classify: func(_ context.Context, err error) resilience.LimitOutcome {
			if err == failed {
				panic("classifier bug")
			}
			return resilience.LimitSampled
		}}})
	if err := m.execute(context.Background(), nil, func(context.Context) error { return failed }); err != failed {
		t.Fatalf("Execute = %v, want the handler's own error", err)
	}
	ev.expect(t, event.HookClassifier, "classifier bug")
	if s := m.Stats(); s.InFlight != 0 {
		t.Fatalf("stats %+v, want the permit back", s)
	}
	if err := m.execute(context.Background(), nil, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("the next request: %v", err)
	}
}
