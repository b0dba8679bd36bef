package inbound

import (
	"bufio"
	"context"
	"encoding/json"
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

// waitFor polls cond with a generous bound (loopback on a loaded machine).
func pollFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// heldServer serves a middleware with one permit and a queue; requests to
// /held wait for release (ignoring their context), /quiet returns without
// writing once its context ends.
func heldServer(t *testing.T, opts Options, base context.Context) (*Middleware, *httptest.Server, func()) {
	t.Helper()
	m := mustNew(t, opts)
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	srv := httptest.NewUnstartedServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/held":
			<-release
			io.WriteString(w, "done")
		case "/quiet":
			<-r.Context().Done() // returns without a word
		default:
			io.WriteString(w, "ok")
		}
	})))
	if base != nil {
		srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	}
	srv.Start()
	t.Cleanup(func() { open(); srv.Close() })
	return m, srv, open
}

type answer struct {
	status int
	reason string
	err    error
}

func get(c *http.Client, url string) answer {
	resp, err := c.Get(url)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	var b struct{ Reason string }
	_ = json.Unmarshal(body, &b)
	return answer{status: resp.StatusCode, reason: b.Reason, err: err}
}

func goGet(c *http.Client, url string) <-chan answer {
	ch := make(chan answer, 1)
	go func() { ch <- get(c, url) }()
	return ch
}

// Reproduction: the server cancels its requests' contexts (a BaseContext
// cancelled at shutdown) while a request is queued. The client, still
// there, gets an honest 503 shutting-down, not net/http's empty 200.
func TestServerCancelWhileQueuedIs503NotEmpty200(t *testing.T) {
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	m, srv, open := heldServer(t, Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1}}, base)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	held := goGet(c, srv.URL+"/held")
	pollFor(t, "the permit held", func() bool { return m.Stats().InFlight == 1 })
	queued := goGet(c, srv.URL+"/ok")
	pollFor(t, "a request queued", func() bool { return m.Stats().Queued == 1 })
	cancelBase()
	if a := <-queued; a.err != nil || a.status != 503 || a.reason != string(resilience.ReasonShuttingDown) {
		t.Fatalf("queued client at server cancel: %+v, want 503 reason shutting-down", a)
	}
	open()
	if a := <-held; a.err != nil || a.status != 200 {
		t.Fatalf("held request: %+v, want the handler's 200", a)
	}
}

// Reproduction: a running request whose handler returns without writing
// after the server ended its context gets a 503, not an empty 200.
func TestServerCancelWhileRunningSilentHandlerIs503(t *testing.T) {
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	m, srv, _ := heldServer(t, Options{Timeout: time.Minute, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, base)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	quiet := goGet(c, srv.URL+"/quiet")
	pollFor(t, "the handler running", func() bool { return m.Stats().InFlight == 1 })
	cancelBase()
	if a := <-quiet; a.err != nil || a.status != 503 || a.reason != string(resilience.ReasonShuttingDown) {
		t.Fatalf("running silent handler at server cancel: %+v, want 503 reason shutting-down", a)
	}
}

// rawHalfClose sends a request on a raw connection, half-closes the write
// side (net/http then takes the client for gone and cancels the context)
// and returns whatever the server sends before closing.
func rawHalfClose(t *testing.T, addr, path string, sent func()) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	sent()
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(bufio.NewReader(conn))
	return string(b)
}

// Reproduction: a client that half-closes its connection behind a held
// permit (queued), or while its handler runs and then returns without a
// word, is gone for net/http: the connection is aborted and nothing is
// written, instead of "HTTP/1.1 200 OK, Content-Length: 0".
func TestClientGoneGetsAbortNotEmpty200(t *testing.T) {
	m, srv, open := heldServer(t, Options{Timeout: time.Minute, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1}}, nil)
	defer open()
	addr := strings.TrimPrefix(srv.URL, "http://")
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	held := goGet(c, srv.URL+"/held")
	pollFor(t, "the permit held", func() bool { return m.Stats().InFlight == 1 })
	got := rawHalfClose(t, addr, "/work", func() {
		pollFor(t, "the raw request queued", func() bool { return m.Stats().Queued == 1 })
	})
	if got != "" {
		t.Errorf("queued client that left got %q, want nothing (connection aborted)", got)
	}
	open()
	if a := <-held; a.status != 200 {
		t.Fatalf("held: %+v", a)
	}
	pollFor(t, "idle", func() bool { return m.Stats().InFlight == 0 })
	got = rawHalfClose(t, addr, "/quiet", func() {
		pollFor(t, "the raw request running", func() bool { return m.Stats().InFlight == 1 })
	})
	if got != "" {
		t.Errorf("running client that left got %q, want nothing (connection aborted)", got)
	}
	pollFor(t, "the permit back", func() bool { return m.Stats().InFlight == 0 })
}

// Drain answers the queue: from the call, queued requests and new
// arrivals get 503 shutting-down at once, the running handler finishes
// with its own response, and Drain returns when nothing is in flight (or
// with the context's error when the grace ends first). No request is left
// without a response.
func TestDrainAnswersTheQueue(t *testing.T) {
	for _, adaptive := range []bool{false, true} {
		name := "fixed"
		opts := Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 3}}
		if adaptive {
			name = "adaptive"
			opts = Options{Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 1, MaxLimit: 1, QueueLimit: 3}}
		}
		t.Run(name, func(t *testing.T) {
			m, srv, open := heldServer(t, opts, nil)
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			held := goGet(c, srv.URL+"/held")
			pollFor(t, "the permit held", func() bool { return m.Stats().InFlight == 1 })
			var queued []<-chan answer
			for i := 0; i < 3; i++ {
				queued = append(queued, goGet(c, srv.URL+"/ok"))
				pollFor(t, "queued", func() bool { return m.Stats().Queued == i+1 })
			}
			short, cancel := context.WithCancel(context.Background())
			cancel()
			if err := m.Drain(short); !errors.Is(err, context.Canceled) {
				t.Fatalf("Drain with an ended grace = %v, want context.Canceled while a handler runs", err)
			}
			for i, ch := range queued {
				if a := <-ch; a.err != nil || a.status != 503 || a.reason != string(resilience.ReasonShuttingDown) {
					t.Fatalf("queued request %d: %+v, want 503 shutting-down", i, a)
				}
			}
			if a := get(c, srv.URL+"/ok"); a.status != 503 || a.reason != string(resilience.ReasonShuttingDown) {
				t.Fatalf("arrival after Drain: %+v, want 503 shutting-down", a)
			}
			drained := make(chan error, 1)
			go func() { drained <- m.Drain(context.Background()) }()
			select {
			case err := <-drained:
				t.Fatalf("Drain returned %v while a handler runs", err)
			case <-time.After(20 * time.Millisecond):
			}
			open()
			if a := <-held; a.err != nil || a.status != 200 {
				t.Fatalf("running request: %+v, want its own 200", a)
			}
			if err := <-drained; err != nil {
				t.Fatalf("Drain = %v, want nil once nothing is in flight", err)
			}
		})
	}
}
