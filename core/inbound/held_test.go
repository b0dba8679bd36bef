package inbound

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// A status written first, or a small body, is held by the writer, not
// committed: a handler that then stalls ignoring its context still gets its
// 504 at the deadline (the 504 guarantee), while a body past the hold limit
// commits and the deadline aborts instead.
func TestServerHeldResponseStill504sAtDeadline(t *testing.T) {
	cases := []struct {
		name  string
		write func(w http.ResponseWriter)
		want  int // 504, or 0 for an aborted connection
	}{
		{"status only", func(w http.ResponseWriter) { w.Header().Set("X-Handler", "1"); w.WriteHeader(http.StatusCreated) }, 504},
		{"many fields and status", func(w http.ResponseWriter) {
			for i := range 12 { // more than a recycled list of copied names holds at first
				w.Header().Set("X-Handler-"+strconv.Itoa(i), "1")
			}
			w.WriteHeader(http.StatusAccepted)
		}, 504},
		{"early hints and status", func(w http.ResponseWriter) {
			w.Header().Set("X-Handler-Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Set("X-Handler", "1")
			w.WriteHeader(http.StatusOK)
		}, 504},
		{"small body", func(w http.ResponseWriter) { io.WriteString(w, "{") }, 504},
		{"status and small body", func(w http.ResponseWriter) { w.WriteHeader(200); io.WriteString(w, "partial") }, 504},
		{"body past the hold", func(w http.ResponseWriter) { w.Write(make([]byte, holdLimit+1)) }, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			release := make(chan struct{})
			m := mustNew(t, Options{Timeout: 100 * time.Millisecond})
			srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c.write(w)
				<-release // ignores its context
			})))
			defer srv.Close()
			if c.want == 0 {
				// Committed: net/http drops the connection when the late
				// handler returns (it cannot end a response early), so
				// release it once the deadline has passed.
				go func() {
					deadline := time.Now().Add(10 * time.Second)
					for m.Stats().Late == 0 && time.Now().Before(deadline) {
						time.Sleep(5 * time.Millisecond)
					}
					close(release)
				}()
				resp, err := srv.Client().Get(srv.URL)
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				if err == nil {
					t.Fatal("a committed response was completed, want the connection aborted")
				}
				return
			}
			defer close(release)
			resp, err := srv.Client().Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			// The handler is still held here: the 504 came on time.
			if err != nil || resp.StatusCode != 504 || string(body) != string(respTimeout.Body) {
				t.Fatalf("got %d %q %v, want the 504", resp.StatusCode, body, err)
			}
			for k := range resp.Header {
				if strings.HasPrefix(k, "X-Handler") {
					t.Fatalf("the 504 carries the handler's field %s: %v", k, resp.Header)
				}
			}
		})
	}
}

// What the handler held is its response when it returns in time: status,
// fields, body and trailers arrive as written.
func TestServerHeldResponseSentOnReturn(t *testing.T) {
	m := mustNew(t, Options{Timeout: 10 * time.Second})
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		w.Header().Set("X-Handler", "1")
		w.WriteHeader(http.StatusAccepted)
		w.Header().Set("X-After", "ignored") // after WriteHeader: ignored, as net/http does
		io.WriteString(w, "held ")
		io.WriteString(w, "body")
		w.Header().Set("X-Sum", "42")
	})))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 202 || string(body) != "held body" || resp.Header.Get("X-Handler") != "1" || resp.Header.Get("X-After") != "" {
		t.Fatalf("got %d %q %v %v", resp.StatusCode, body, resp.Header, err)
	}
	if resp.Trailer.Get("X-Sum") != "42" {
		t.Fatalf("trailer = %v", resp.Trailer)
	}
}

// Over HTTP/2 (TLS and h2c) the 504 reaches the client at the deadline as
// a complete response: its stream ends cleanly (END_STREAM, no reset), so
// a client that checks read errors sees a 504 and not a stream error. The
// late handler keeps running and keeps its permit until it returns, and
// the connection its other streams share goes on. Under Serve the same
// holds with the router wrapped in DetachHTTP2.
func TestServerHTTP2TimeoutEndsStreamKeepsConnection(t *testing.T) {
	entries := map[string]func(*Middleware, http.Handler) http.Handler{
		"Handler": (*Middleware).Handler,
		"Serve under DetachHTTP2": func(m *Middleware, h http.Handler) http.Handler {
			return detachHTTP2(serveAsHandler(m, h))
		},
	}
	for entry, wrap := range entries {
		for _, tlsOn := range []bool{true, false} {
			name := entry + "/h2c"
			if tlsOn {
				name = entry + "/TLS"
			}
			t.Run(name, func(t *testing.T) { testHTTP2Timeout(t, tlsOn, wrap) })
		}
	}
}

func testHTTP2Timeout(t *testing.T, tlsOn bool, wrap func(*Middleware, http.Handler) http.Handler) {
	m := mustNew(t, Options{Timeout: 100 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	release := make(chan struct{})
	returned := make(chan struct{})
	srv := httptest.NewUnstartedServer(wrap(m, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			defer close(returned)
			<-release // ignores its context
			return
		}
		io.WriteString(w, "ok")
	})))
	// A late handler that returns after its 504 is no panic: nothing may
	// be logged (the server's log catches what the middleware reports).
	var logged lockedBuffer
	srv.Config.ErrorLog = log.New(&logged, "", 0)
	var c *http.Client
	if tlsOn {
		srv.EnableHTTP2 = true
		srv.StartTLS()
		c = srv.Client()
	} else {
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Start()
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		c = &http.Client{Transport: tr}
		defer tr.CloseIdleConnections()
	}
	defer srv.Close()
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()

	var reused []bool
	var mu sync.Mutex
	get := func(path string) (*http.Response, error) {
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			mu.Lock()
			reused = append(reused, i.Reused)
			mu.Unlock()
		}})
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		return c.Do(req)
	}
	resp, err := get("/slow")
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 || resp.StatusCode != 504 || resp.Header.Get("Connection") != "" {
		t.Fatalf("got %s %d %v", resp.Proto, resp.StatusCode, resp.Header)
	}
	// The body is whole and the stream ends without error, while the
	// handler is still held.
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != string(respTimeout.Body) {
		t.Fatalf("504 body = %q, read error %v; want the whole body and a clean end", body, err)
	}
	select {
	case <-returned:
		t.Fatal("the handler returned before it was released")
	default:
	}
	if s := m.Stats(); s.InFlight != 1 || s.Late != 1 {
		t.Fatalf("stats after the 504 = %+v, want the late handler holding its permit", s)
	}
	// The permit is still the late handler's: the next request is shed,
	// on the same connection.
	resp, err = get("/ok")
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("while the late handler runs: %d %q %v, want 503", resp.StatusCode, body, err)
	}
	open()
	<-returned
	deadline := time.Now().Add(10 * time.Second)
	for m.Stats().InFlight != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := m.Stats(); s.InFlight != 0 || s.Late != 0 || s.LateTotal != 1 {
		t.Fatalf("stats once the late handler returned = %+v, want nothing in flight, none late, one late in total", s)
	}
	resp, err = get("/ok")
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("after the handler returned: %d %q %v, want 200 ok", resp.StatusCode, body, err)
	}
	if s := logged.String(); strings.Contains(s, "panic") {
		t.Fatalf("server log after the late handler returned: %q, want no panic", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reused) != 3 || !reused[1] || !reused[2] {
		t.Fatalf("connection reuse = %v, want every request on the same connection", reused)
	}
}

// An HTTP/2 handler's panic behaves as on HTTP/1: before its deadline it
// reaches ServeHTTP's caller (an outer recovering middleware sees the
// same value) and the permit comes back; after its 504 it is logged and
// the permit comes back when the handler ends.
func TestServerHTTP2HandlerPanic(t *testing.T) {
	m := mustNew(t, Options{Timeout: 100 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	late := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(late) }) }
	defer open()
	recovered := make(chan any, 1)
	inner := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/late" {
			<-late
		}
		panic("boom")
	}))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			recovered <- v
			if v != nil {
				w.WriteHeader(500)
			}
		}()
		inner.ServeHTTP(w, r)
	}))
	var logged strings.Builder
	var logMu sync.Mutex
	srv.Config.ErrorLog = log.New(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logged.Write(p)
	}), "", 0)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/now")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v := <-recovered; v != "boom" || resp.StatusCode != 500 {
		t.Fatalf("outer middleware recovered %v (status %d), want the handler's panic", v, resp.StatusCode)
	}
	if s := m.Stats(); s.InFlight != 0 {
		t.Fatalf("stats %+v, want the permit back", s)
	}
	resp, err = srv.Client().Get(srv.URL + "/late")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if v := <-recovered; v != nil || resp.StatusCode != 504 || err != nil || string(body) != string(respTimeout.Body) {
		t.Fatalf("got %d %q (read error %v), outer recovered %v; want the whole 504, a clean end and no panic", resp.StatusCode, body, err, v)
	}
	open()
	deadline := time.Now().Add(10 * time.Second)
	for m.Stats().InFlight != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if s := m.Stats(); s.InFlight != 0 || !strings.Contains(logged.String(), "boom") {
		t.Fatalf("stats %+v, log %q; want the permit back and the late panic logged", s, logged.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A timeout strategy in a custom inbound pipeline reports its deadline
// (OnTimeout) like the middleware's own; a retry in it never runs the
// handler twice.
func TestCustomPipelineTimeoutEventAndSingleRun(t *testing.T) {
	var mu sync.Mutex
	var events []event.Name
	lis := event.ListenerFunc(func(_ context.Context, e event.Event) {
		mu.Lock()
		events = append(events, e.Name)
		mu.Unlock()
	})
	p, err := resilience.NewBuilder[struct{}](resilience.WithListener(lis)).
		AddRetry(resilience.RetryOptions[struct{}]{MaxRetryAttempts: 2}).
		AddTimeout(resilience.TimeoutOptions{Timeout: 100 * time.Millisecond}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	m := mustNew(t, Options{Pipeline: p})
	var mu2 sync.Mutex
	count := 0
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu2.Lock()
		count++
		mu2.Unlock()
		<-r.Context().Done()
	})))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 504 || err != nil {
		t.Fatalf("status %d, read error %v; want a whole 504", resp.StatusCode, err)
	}
	srv.Close() // waits for the handler
	mu.Lock()
	defer mu.Unlock()
	timeouts := 0
	for _, e := range events {
		if e == event.Timeout {
			timeouts++
		}
	}
	if timeouts == 0 {
		t.Fatalf("events = %v, want OnTimeout", events)
	}
	mu2.Lock()
	defer mu2.Unlock()
	if count != 1 {
		t.Fatalf("handler ran %d times, want once", count)
	}
}

// lockedBuffer is a strings.Builder safe for the server's log goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
