package inbound

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Real loopback servers: these guarantees are about what reaches a real
// client over a real connection. Handlers are held by channel gates, never
// by sleeps; the only timing is the middleware's own short timeout.

const testTimeout = 150 * time.Millisecond

// spyWriter sits between net/http and the middleware and records whether
// anything was written to the connection's response.
type spyWriter struct {
	http.ResponseWriter
	mu    sync.Mutex
	wrote bool
}

func (s *spyWriter) WriteHeader(code int) { s.mark(); s.ResponseWriter.WriteHeader(code) }
func (s *spyWriter) Write(p []byte) (int, error) {
	s.mark()
	return s.ResponseWriter.Write(p)
}
func (s *spyWriter) mark()                       { s.mu.Lock(); s.wrote = true; s.mu.Unlock() }
func (s *spyWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
func (s *spyWriter) written() bool               { s.mu.Lock(); defer s.mu.Unlock(); return s.wrote }
func (s *spyWriter) Flush()                      { s.ResponseWriter.(http.Flusher).Flush() }
func (s *spyWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return s.ResponseWriter.(http.Hijacker).Hijack()
}

// harness serves m.Handler(h) on loopback and reports, per request, when
// ServeHTTP returned, what it panicked with (an outer recovering handler,
// re-panicking nothing), and whether anything was written.
type harness struct {
	t      *testing.T
	m      *Middleware
	srv    *httptest.Server
	served chan served
}

type served struct {
	panicked any
	wrote    bool
}

func newHarness(t *testing.T, opts Options, h http.Handler, recoverPanics bool) *harness {
	t.Helper()
	hs := &harness{t: t, m: mustNew(t, opts), served: make(chan served, 16)}
	inner := hs.m.Handler(h)
	hs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		spy := &spyWriter{ResponseWriter: w}
		var s served
		defer func() {
			if recoverPanics {
				s.panicked = recover()
			}
			s.wrote = spy.written()
			hs.served <- s
		}()
		inner.ServeHTTP(spy, r)
	}))
	hs.srv.Config.ErrorLog = nil
	t.Cleanup(func() {
		hs.srv.CloseClientConnections()
		hs.srv.Close()
		hs.srv.Client().CloseIdleConnections()
	})
	return hs
}

func (hs *harness) get(ctx context.Context) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", hs.srv.URL, nil)
	return hs.srv.Client().Do(req)
}

func readAll(t *testing.T, resp *http.Response) (string, error) {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// Invariants 5 and 7 and the timeout guarantee: a handler ignoring its
// context gets a complete 504 flushed at the deadline (while it is still
// running), its late writes are discarded, its permit is held until it
// returns, and it is counted as late meanwhile.
func TestServerIgnoredContextGets504AtDeadline(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	lateErr := make(chan error, 1)
	hs := newHarness(t, Options{
		Timeout:     testTimeout,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Secret", "handler-only")
		entered <- struct{}{}
		<-release // ignores r.Context()
		_, err := w.Write([]byte("late body"))
		lateErr <- err
	}), false)

	resp, err := hs.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	body, err := readAll(t, resp)
	if err != nil {
		t.Fatalf("504 body incomplete: %v", err)
	}
	// The handler is still blocked on release: the 504 came at the deadline.
	if resp.StatusCode != 504 || body != bodyTimeout || resp.ContentLength != int64(len(bodyTimeout)) || !resp.Close {
		t.Fatalf("got %d close=%v len=%d %q", resp.StatusCode, resp.Close, resp.ContentLength, body)
	}
	if resp.Header.Get("X-Secret") != "" {
		t.Errorf("handler header leaked into the 504")
	}
	if s := hs.m.Stats(); s.InFlight != 1 || s.Late != 1 {
		t.Fatalf("stats while late = %+v, want the permit held and late 1", s)
	}
	// The cap still holds: the late handler uses the only permit.
	resp2, err := hs.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := readAll(t, resp2); resp2.StatusCode != 503 || b != bodyFull {
		t.Fatalf("second request: %d %q", resp2.StatusCode, b)
	}
	<-hs.served // the 503
	close(release)
	if err := <-lateErr; !errors.Is(err, http.ErrHandlerTimeout) {
		t.Fatalf("late write error = %v", err)
	}
	<-hs.served
	if s := hs.m.Stats(); s.InFlight != 0 || s.Late != 0 || s.LateTotal != 1 {
		t.Fatalf("stats after = %+v", s)
	}
}

// A response flushed before the deadline is committed: the deadline
// aborts the connection, the client never sees a 504.
func TestServerFlushThenDeadlineAborts(t *testing.T) {
	hs := newHarness(t, Options{Timeout: testTimeout}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		w.Write([]byte(" more")) // discarded
	}), true)
	resp, err := hs.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d, want the committed 200", resp.StatusCode)
	}
	body, err := readAll(t, resp)
	if err == nil || body != "partial" {
		t.Fatalf("body = %q, err = %v; want a truncated body and an error", body, err)
	}
	if s := <-hs.served; s.panicked != http.ErrAbortHandler {
		t.Fatalf("middleware ended with %v, want http.ErrAbortHandler", s.panicked)
	}
}

// Flush works through the middleware, and http.ResponseController too.
func TestServerFlushStreams(t *testing.T) {
	step := make(chan struct{})
	hs := newHarness(t, Options{Timeout: time.Minute}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("one\n"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		<-step
		w.Write([]byte("two\n"))
	}), false)
	resp, err := hs.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "one\n" {
		t.Fatalf("first chunk %q, %v", line, err)
	}
	close(step) // the first chunk arrived before the handler went on
	rest, _ := io.ReadAll(br)
	resp.Body.Close()
	if string(rest) != "two\n" {
		t.Fatalf("rest %q", rest)
	}
	<-hs.served
}

// A hijacked connection is no longer timed: its context is not cancelled
// at the deadline and it reports no deadline.
func TestServerHijackIsNotTimed(t *testing.T) {
	hs := newHarness(t, Options{Timeout: testTimeout}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		if _, ok := r.Context().Deadline(); ok {
			t.Errorf("hijacked request still reports a deadline")
		}
		select {
		case <-r.Context().Done():
			t.Errorf("context cancelled after hijack: %v", context.Cause(r.Context()))
		case <-time.After(3 * testTimeout):
		}
		if _, err := w.Write([]byte("x")); !errors.Is(err, http.ErrHijacked) {
			t.Errorf("write after hijack: %v", err)
		}
		rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		rw.Flush()
	}), false)
	resp, err := hs.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if body, err := readAll(t, resp); err != nil || resp.StatusCode != 200 || body != "hijacked" {
		t.Fatalf("got %d %q %v", resp.StatusCode, body, err)
	}
	<-hs.served
	if s := hs.m.Stats(); s.LateTotal != 0 {
		t.Fatalf("hijacked request counted late: %+v", s)
	}
}

// Client disconnect while running: the handler's context is cancelled,
// nothing is written, the permit is freed.
func TestServerClientDisconnectWhileRunning(t *testing.T) {
	entered := make(chan struct{}, 1)
	cause := make(chan error, 1)
	hs := newHarness(t, Options{
		Timeout:     time.Minute,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-r.Context().Done()
		cause <- context.Cause(r.Context())
	}), false)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := hs.get(ctx); errc <- err }()
	<-entered
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("client got a response")
	}
	if err := <-cause; !errors.Is(err, context.Canceled) {
		t.Fatalf("cause = %v", err)
	}
	s := <-hs.served
	if s.wrote {
		t.Fatal("a response was written to a gone client")
	}
	if st := hs.m.Stats(); st.InFlight != 0 || st.Late != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// Client disconnect while queued: the queue place is freed, nothing is
// written, and the permit holder is unaffected.
func TestServerClientDisconnectWhileQueued(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	hs := newHarness(t, Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 4, QueueTimeout: time.Minute},
	}, gated(entered, release), false)
	firstDone := make(chan error, 1)
	go func() {
		resp, err := hs.get(context.Background())
		if err == nil {
			_, err = readAll(t, resp)
		}
		firstDone <- err
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := hs.get(ctx); errc <- err }()
	waitFor(t, func() bool { return hs.m.Stats().Queued == 1 })
	cancel()
	<-errc
	if s := <-hs.served; s.wrote {
		t.Fatal("a response was written for the queued request")
	}
	if st := hs.m.Stats(); st.Queued != 0 || st.InFlight != 1 {
		t.Fatalf("stats = %+v", st)
	}
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	<-hs.served
}

// waitFor polls a condition that another goroutine makes true without a
// signal we can hook (the limiter's queue). Bounded; not a timing assert.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// A panic before the deadline and one after it both propagate with their
// original value (http.ErrAbortHandler keeps its identity) and free the
// permit.
func TestServerPanicPropagates(t *testing.T) {
	t.Run("before the deadline", func(t *testing.T) {
		hs := newHarness(t, Options{
			Timeout:     time.Minute,
			Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
		}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }), true)
		if resp, err := hs.get(context.Background()); err == nil {
			resp.Body.Close()
		}
		if s := <-hs.served; s.panicked != http.ErrAbortHandler {
			t.Fatalf("recovered %v", s.panicked)
		}
		if st := hs.m.Stats(); st.InFlight != 0 {
			t.Fatalf("stats = %+v", st)
		}
	})
	t.Run("after the deadline", func(t *testing.T) {
		release := make(chan struct{})
		hs := newHarness(t, Options{
			Timeout:     testTimeout,
			Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
		}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			<-release
			panic(http.ErrAbortHandler)
		}), true)
		resp, err := hs.get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if body, _ := readAll(t, resp); resp.StatusCode != 504 || body != bodyTimeout {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
		close(release)
		if s := <-hs.served; s.panicked != http.ErrAbortHandler {
			t.Fatalf("recovered %v", s.panicked)
		}
		if st := hs.m.Stats(); st.InFlight != 0 || st.Late != 0 {
			t.Fatalf("stats = %+v", st)
		}
	})
}

// A handler blocked reading the request body is released at the deadline
// (the read deadline is set), and the client gets the 504.
func TestServerBlockedBodyReadReleased(t *testing.T) {
	readErr := make(chan error, 1)
	hs := newHarness(t, Options{Timeout: testTimeout}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 64)
		var err error
		for err == nil {
			_, err = r.Body.Read(buf) // ignores its context: only the read deadline frees it
		}
		readErr <- err
	}), false)
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest("POST", hs.srv.URL, pr)
	go pw.Write([]byte("some of the body")) // then never finishes
	resp, err := hs.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := readAll(t, resp)
	if resp.StatusCode != 504 || body != bodyTimeout {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if err := <-readErr; err == nil || err == io.EOF {
		t.Fatalf("body read ended with %v, want a deadline error", err)
	}
	<-hs.served
}

// A timeout inside a custom pipeline also answers 504 at its deadline.
func TestServerCustomPipelineTimeout(t *testing.T) {
	limiter, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 2})
	if err != nil {
		t.Fatal(err)
	}
	p, err := resilience.NewBuilder[struct{}]().AddStrategy(limiter).AddTimeout(resilience.TimeoutOptions{Timeout: testTimeout}).Build()
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var sawView bool
	hs := newHarness(t, Options{Pipeline: p, LimiterStats: limiter.Stats}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := RequestFrom(r.Context())
		sawView = ok && v.Path == "/"
		<-release // ignores its context
	}), false)
	resp, err := hs.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := readAll(t, resp); resp.StatusCode != 504 || body != bodyTimeout {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if s := hs.m.Stats(); s.Limit != 2 || s.InFlight != 1 || s.Late != 1 {
		t.Fatalf("stats while late = %+v", s)
	}
	close(release)
	<-hs.served
	if !sawView {
		t.Fatal("handler did not see the request view")
	}
	if s := hs.m.Stats(); s.InFlight != 0 || s.Late != 0 {
		t.Fatalf("stats after = %+v", s)
	}
}

// Headers the handler set before a deadline do not reach the 504, and a
// 1xx sent before it does not either.
func TestTimeoutWriterHeadersPrivateUntilCommit(t *testing.T) {
	release := make(chan struct{})
	hs := newHarness(t, Options{Timeout: testTimeout}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("X-Later", "1")
		<-release
	}), false)
	resp, err := hs.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := readAll(t, resp)
	if resp.StatusCode != 504 || body != bodyTimeout || resp.Header.Get("Link") != "" || resp.Header.Get("X-Later") != "" {
		t.Fatalf("got %d %v %q", resp.StatusCode, resp.Header, body)
	}
	close(release)
	<-hs.served
}

// A handler that sets headers and returns without writing still sends
// them; trailers set after commit arrive.
func TestTimeoutWriterHeadersAndTrailers(t *testing.T) {
	hs := newHarness(t, Options{Timeout: time.Minute}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/empty" {
			w.Header().Set("X-Only", "header")
			return
		}
		h := w.Header()
		h.Set("Trailer", "X-Sum")
		w.Write([]byte("data"))
		h.Set("X-Sum", "42") // the map obtained before the commit
	}), false)
	resp, err := http.Get(hs.srv.URL + "/empty")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Only") != "header" {
		t.Fatalf("got %d %v", resp.StatusCode, resp.Header)
	}
	<-hs.served
	resp, err = http.Get(hs.srv.URL + "/t")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := readAll(t, resp)
	if body != "data" || resp.Trailer.Get("X-Sum") != "42" {
		t.Fatalf("body %q trailer %v", body, resp.Trailer)
	}
	<-hs.served
	http.DefaultClient.CloseIdleConnections()
}

// Writes after the handler returned are refused (no touch of a finished
// response), and the writer's states answer as documented.
func TestTimeoutWriterAfterDone(t *testing.T) {
	var kept http.ResponseWriter
	m := mustNew(t, Options{Timeout: time.Minute})
	m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { kept = w })).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if _, err := kept.Write([]byte("x")); !errors.Is(err, http.ErrHandlerTimeout) {
		t.Fatalf("write after return: %v", err)
	}
	if !strings.Contains(http.ErrHandlerTimeout.Error(), "timeout") {
		t.Fatal("unexpected sentinel")
	}
}
