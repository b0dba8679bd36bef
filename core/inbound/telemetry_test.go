package inbound

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// eventLog is a listener that keeps every event.
type eventLog struct {
	mu     sync.Mutex
	events []event.Event
}

func (l *eventLog) OnEvent(_ context.Context, e event.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

// named returns the events called name.
func (l *eventLog) named(name event.Name) []event.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []event.Event
	for _, e := range l.events {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// entryPoint runs one request through one of the middleware's entry
// points, with a handler that returns when hold is closed (ignoring its
// context), and returns once the entry point has.
type entryPoint func(m *Middleware, ctx context.Context, hold <-chan struct{})

// entryPoints are every way an adapter runs a request.
var entryPoints = map[string]entryPoint{
	"Handler": func(m *Middleware, ctx context.Context, hold <-chan struct{}) {
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hold }))
		h.ServeHTTP(newSyncRecorder(), httptest.NewRequestWithContext(ctx, "GET", "/", nil))
	},
	"Serve": func(m *Middleware, ctx context.Context, hold <-chan struct{}) {
		raw := &ginLike{next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hold })}
		_ = m.serve(newSyncRecorder(), httptest.NewRequestWithContext(ctx, "GET", "/", nil), raw, continueGinLike)
	},
	"Execute": func(m *Middleware, ctx context.Context, hold <-chan struct{}) {
		_ = m.execute(ctx, &fakeRequest{}, func(context.Context) error { <-hold; return nil })
	},
	"ExecuteInPlace": func(m *Middleware, ctx context.Context, hold <-chan struct{}) {
		_ = m.executeInPlace(ctx, &fakeRequest{}, func(context.Context) error { <-hold; return nil }, func(error) {})
	},
}

// A rejection is emitted in one place, core's, with the same fields
// whichever entry point and limiter (fixed, adaptive, or a custom
// pipeline): the reason and the time spent queued.
func TestRejectionEventCarriesQueueWait(t *testing.T) {
	const wait = 100 * time.Millisecond
	limiters := map[string]func(log *eventLog) Options{
		"fixed": func(log *eventLog) Options {
			return Options{Name: "api", Listener: log, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: wait}}
		},
		"adaptive": func(log *eventLog) Options {
			return Options{Name: "api", Listener: log, Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, QueueLimit: 1, QueueTimeout: wait}}
		},
		"pipeline": func(log *eventLog) Options {
			p, err := resilience.NewBuilder[struct{}](resilience.WithName("api"), resilience.WithListener(log)).
				AddConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: wait}).Build()
			if err != nil {
				panic(err)
			}
			return Options{Pipeline: p}
		},
	}
	for ln, lim := range limiters {
		for en, entry := range entryPoints {
			t.Run(ln+"/"+en, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					log := &eventLog{}
					m, err := newFor(fakeFramework, lim(log))
					if err != nil {
						t.Fatal(err)
					}
					hold := make(chan struct{})
					go entry(m, t.Context(), hold) // takes the only permit
					synctest.Wait()
					entry(m, t.Context(), hold) // queues, then times out
					close(hold)
					synctest.Wait()
					got := log.named(event.ConcurrencyLimiterRejected)
					if len(got) != 1 {
						t.Fatalf("rejections %+v, want one", got)
					}
					e := got[0]
					if e.Reason != string(resilience.ReasonQueueTimeout) || e.Duration != wait || e.Pipeline != "api" || e.Strategy == "" || e.Err == nil {
						t.Errorf("event %+v, want a queue-timeout rejection with Duration %v", e, wait)
					}
				})
			})
		}
	}
}

// The rate limit's events are core's: every entry point emits, for a
// rejection and for a store failure, the event a pipeline with the same
// rate limiter emits, field for field.
func TestRateLimitEventsAreCores(t *testing.T) {
	for _, c := range []struct {
		name  string
		event event.Name
		opts  func() resilience.RateLimiterOptions
	}{
		{"rejected", event.RateLimiterRejected, func() resilience.RateLimiterOptions {
			return resilience.RateLimiterOptions{Name: "quota", PermitLimit: 1, Window: time.Minute}
		}},
		{"fail-open", event.RateLimiterStoreError, func() resilience.RateLimiterOptions {
			return resilience.RateLimiterOptions{Name: "quota", PermitLimit: 1, Window: time.Minute, Store: failingStore{}}
		}},
		{"fail-closed", event.RateLimiterStoreError, func() resilience.RateLimiterOptions {
			return resilience.RateLimiterOptions{Name: "quota", PermitLimit: 1, Window: time.Minute, Store: failingStore{}, FailClosed: true}
		}},
	} {
		synctest.Test(t, func(t *testing.T) {
			coreLog := &eventLog{}
			p, err := resilience.NewBuilder[struct{}](resilience.WithName("api"), resilience.WithListener(coreLog)).AddRateLimiter(c.opts()).Build()
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				_, _ = p.Execute(t.Context(), func(context.Context) (struct{}, error) { return struct{}{}, nil })
			}
			want := coreLog.named(c.event)
			if len(want) == 0 {
				t.Fatalf("%s: the pipeline emitted no %s", c.name, c.event)
			}
			for en, entry := range entryPoints {
				log := &eventLog{}
				rl := c.opts()
				m, err := newFor(fakeFramework, Options{Name: "api", Listener: log, RateLimit: &rl})
				if err != nil {
					t.Fatal(err)
				}
				open := make(chan struct{})
				close(open)
				for range 2 {
					entry(m, t.Context(), open)
				}
				got := log.named(c.event)
				if len(got) != len(want) {
					t.Errorf("%s through %s: %d %s events, the pipeline %d", c.name, en, len(got), c.event, len(want))
					continue
				}
				for i, e := range got {
					w := want[i]
					if e.Reason != w.Reason || e.Duration != w.Duration || e.Pipeline != w.Pipeline || e.Strategy != w.Strategy ||
						fmt.Sprint(e.Err) != fmt.Sprint(w.Err) {
						t.Errorf("%s through %s: event %+v, the pipeline's %+v", c.name, en, e, w)
					}
				}
			}
		})
	}
}

// The timeout's event is the same whichever entry point: one event.Timeout
// when the middleware's own timeout ends a handler that ignores its
// context, with the timeout as Duration, and none when the caller's
// deadline came first (the caller's doing, as for core's timeout
// strategy), though the request is answered with a 504 either way.
func TestTimeoutEventSameForEveryEntryPoint(t *testing.T) {
	const timeout = time.Second
	for en, entry := range entryPoints {
		for _, upstream := range []bool{false, true} {
			name := en
			if upstream {
				name += "/caller's deadline first"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					log := &eventLog{}
					m, err := newFor(fakeFramework, Options{Name: "api", Listener: log, Timeout: timeout,
						Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
					if err != nil {
						t.Fatal(err)
					}
					ctx := t.Context()
					if upstream {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, timeout/2)
						defer cancel()
					}
					hold := make(chan struct{})
					time.AfterFunc(2*timeout, func() { close(hold) })
					entry(m, ctx, hold)
					time.Sleep(2 * timeout) // past the handler's return (a timed entry point may return at the deadline)
					synctest.Wait()
					got := log.named(event.Timeout)
					if upstream {
						if len(got) != 0 {
							t.Errorf("timeout events %+v, want none: the caller's deadline came first", got)
						}
						return
					}
					var tre *resilience.TimeoutRejectedError
					if len(got) != 1 || got[0].Duration != timeout || got[0].Pipeline != "api" || got[0].Strategy != "Timeout" ||
						!errors.As(got[0].Err, &tre) || tre.Timeout != timeout {
						t.Errorf("timeout events %+v, want one with Duration %v", got, timeout)
					}
				})
			})
		}
	}
}
