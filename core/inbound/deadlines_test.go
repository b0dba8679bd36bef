package inbound

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// The middleware's one deadline timer answers every late request at its own
// deadline, whatever the order in which requests start and finish, and
// idles once nothing is due.
func TestDeadlineListAnswersEachRequestAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 5 * time.Second
		m := mustNew(t, Options{Timeout: timeout})
		m.deadlines.AllowFakeClock() // this middleware lives in this bubble only
		release := map[string]chan struct{}{}
		for _, name := range []string{"a", "b", "c", "d"} {
			release[name] = make(chan struct{}) // made up front: handlers read the map
		}
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release[r.URL.Path[1:]] // ignores its context
		}))
		type call struct {
			w     *syncRecorder
			done  <-chan struct{}
			start time.Time
		}
		calls := map[string]*call{}
		startCall := func(name string, ctx context.Context) {
			c := &call{w: newSyncRecorder(), start: time.Now()}
			c.done = serveAsync(h, c.w, httptest.NewRequest("GET", "/"+name, nil).WithContext(ctx))
			calls[name] = c
		}
		// a at 0s, b at 1s (finishes in time at 2s), c at 2s, d at 2.5s
		// with an upstream budget of 1s: it must jump the queue.
		startCall("a", context.Background())
		time.Sleep(time.Second)
		startCall("b", context.Background())
		time.Sleep(time.Second)
		close(release["b"])
		<-calls["b"].done
		startCall("c", context.Background())
		time.Sleep(500 * time.Millisecond)
		upstream, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		startCall("d", upstream)

		want := map[string]time.Duration{"a": timeout, "c": timeout, "d": time.Second}
		for _, name := range []string{"d", "a", "c"} {
			c := calls[name]
			<-c.w.written
			synctest.Wait()
			if got := time.Since(c.start); got != want[name] {
				t.Errorf("%s: 504 after %v, want %v", name, got, want[name])
			}
			if code, _, _ := c.w.result(); code != http.StatusGatewayTimeout {
				t.Errorf("%s: status %d", name, code)
			}
		}
		if code, _, _ := calls["b"].w.result(); code != http.StatusOK {
			t.Errorf("b finished in time but got %d", code)
		}
		for _, name := range []string{"a", "c", "d"} {
			close(release[name])
			<-calls[name].done
		}
		// Nothing is listed any more; the timer fires at most once more and
		// then idles.
		time.Sleep(2 * timeout)
		if !m.deadlines.Idle() {
			t.Fatalf("deadline list not idle: %d listed", m.deadlines.Len())
		}
	})
}

// Requests whose deadlines arrive far out of order (earlier than many
// listed ones) keep a timer of their own, and still get their 504 on time.
func TestDeadlineListFarOutOfOrderKeepsOwnTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustNew(t, Options{Timeout: 10 * time.Second})
		m.deadlines.AllowFakeClock() // this middleware lives in this bubble only
		release := make(chan struct{})
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
		var dones []<-chan struct{}
		const listed = 20 // more than the list walks back
		for i := 0; i < listed; i++ {
			dones = append(dones, serveAsync(h, newSyncRecorder(), httptest.NewRequest("GET", fmt.Sprint("/", i), nil)))
		}
		synctest.Wait()
		upstream, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		w := newSyncRecorder()
		start := time.Now()
		dones = append(dones, serveAsync(h, w, httptest.NewRequest("GET", "/early", nil).WithContext(upstream)))
		synctest.Wait()
		if n := m.deadlines.Len(); n != listed {
			t.Errorf("%d requests listed, want %d (the early one on a timer of its own)", n, listed)
		}
		<-w.written
		synctest.Wait()
		if got := time.Since(start); got != time.Second {
			t.Errorf("early request answered after %v, want 1s", got)
		}
		if code, _, _ := w.result(); code != http.StatusGatewayTimeout {
			t.Errorf("status %d", code)
		}
		close(release)
		for _, d := range dones {
			<-d
		}
	})
}

// A Middleware shared by tests inside and outside synctest bubbles keeps
// answering on time: its deadline timer never moves between clocks.
func TestDeadlineListAcrossBubbles(t *testing.T) {
	m := mustNew(t, Options{Timeout: time.Second})
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // watches its context: returns at the deadline
	}))
	serveOnce := func() int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		return w.Code
	}
	for round := 0; round < 2; round++ {
		synctest.Test(t, func(t *testing.T) {
			if code := serveOnce(); code != http.StatusGatewayTimeout {
				t.Fatalf("in a bubble: status %d", code)
			}
		})
		// Outside any bubble, on the real clock (a short real timeout).
		if code := serveOnce(); code != http.StatusGatewayTimeout {
			t.Fatalf("outside a bubble: status %d", code)
		}
	}
}

// blockingWriter is a ResponseWriter whose client never reads: writes block
// until released.
type blockingWriter struct {
	h       http.Header
	release chan struct{}
}

func (b *blockingWriter) Header() http.Header { return b.h }
func (b *blockingWriter) WriteHeader(int)     {}
func (b *blockingWriter) Write(p []byte) (int, error) {
	<-b.release
	return len(p), nil
}

// A client that does not read blocks the 504 written for its own request,
// never the deadlines of the others: one slow client cannot switch off the
// timeout for everyone.
func TestDeadlineListSlowClientDoesNotStallOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustNew(t, Options{Timeout: time.Second})
		m.deadlines.AllowFakeClock()
		release := make(chan struct{})
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release // ignores its context
		}))
		slow := &blockingWriter{h: http.Header{}, release: make(chan struct{})}
		slowDone := serveAsync(h, slow, httptest.NewRequest("GET", "/slow", nil))
		time.Sleep(500 * time.Millisecond)
		w := newSyncRecorder()
		start := time.Now()
		done := serveAsync(h, w, httptest.NewRequest("GET", "/other", nil))
		<-w.written
		synctest.Wait()
		if got := time.Since(start); got != time.Second {
			t.Errorf("other request's 504 after %v, want 1s", got)
		}
		close(release)
		close(slow.release)
		<-done
		<-slowDone
	})
}

// signalWriter records the status and signals when it is written.
type signalWriter struct {
	h      http.Header
	status int
	sent   chan struct{}
}

func (w *signalWriter) Header() http.Header         { return w.h }
func (w *signalWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *signalWriter) WriteHeader(code int) {
	w.status = code
	close(w.sent)
}

// Under a custom pipeline with Timeout, a net/http request is answered at
// the pipeline's own earlier timeout, while its handler runs on and
// counts late once.
func TestHandlerCustomPipelineTimeoutAnsweredWhenItPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := resilience.NewBuilder[struct{}]().AddTimeout(resilience.TimeoutOptions{Timeout: time.Second}).Build()
		if err != nil {
			t.Fatal(err)
		}
		m := mustNew(t, Options{Pipeline: p, Timeout: 5 * time.Second})
		release := make(chan struct{})
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
		w := &signalWriter{h: http.Header{}, sent: make(chan struct{})}
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		}()
		<-w.sent
		if d := time.Since(start); d != time.Second || w.status != http.StatusGatewayTimeout {
			t.Errorf("answered %d after %v, want 504 at the pipeline's timeout (1s)", w.status, d)
		}
		if s := m.Stats(); s.Late != 1 {
			t.Errorf("stats at the deadline %+v, want the handler late", s)
		}
		close(release)
		<-done
		if s := m.Stats(); s.Late != 0 || s.LateTotal != 1 {
			t.Errorf("stats after %+v", s)
		}
	})
}

// A timed handler's context ends with context.Canceled once the handler
// returned, as a CancelFunc's does, whether the middleware's timeout or a
// custom pipeline's times it: work the handler left behind on it stops.
func TestTimedHandlerContextCanceledAfterReturn(t *testing.T) {
	p, err := resilience.NewBuilder[struct{}]().AddTimeout(resilience.TimeoutOptions{Timeout: time.Minute}).Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"Options.Timeout", Options{Timeout: time.Minute}},
		{"custom pipeline's timeout", Options{Pipeline: p}},
		{"both", Options{Pipeline: p, Timeout: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNew(t, tc.opts)
			var kept context.Context
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				kept = r.Context()
				_ = kept.Done() // a handler that watched its context
			}))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d", rec.Code)
			}
			<-kept.Done()
			if err := kept.Err(); !errors.Is(err, context.Canceled) {
				t.Fatalf("after return Err = %v, want context.Canceled", err)
			}
		})
	}
}
