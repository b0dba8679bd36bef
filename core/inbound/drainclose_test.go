package inbound

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// TestClosesConnection protects which answers end their connection: a
// 503 shutting-down always, every answer once Drain started, and nothing
// else; Render's Response then carries Connection: close, unless a Render
// hook set the field itself.
func TestClosesConnection(t *testing.T) {
	full := &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonFull}
	m, err := New(Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	connection := func(err error) []string {
		resp, _ := m.render(err)
		return resp.Header["Connection"]
	}
	if m.closesConnection(full) || connection(full) != nil {
		t.Fatalf("a 503 full closes its connection: %q", connection(full))
	}
	for _, err := range []error{errShuttingDown, fmt.Errorf("wrapped: %w", errShuttingDown)} {
		if !m.closesConnection(err) || strings.Join(connection(err), ",") != "close" {
			t.Fatalf("a 503 shutting-down (%v): Connection %q, want close", err, connection(err))
		}
	}
	if respFull.Header["Connection"] != nil || respShuttingDown.Header["Connection"] != nil {
		t.Fatal("Render changed a shared response header")
	}
	if err := m.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{full, resilience.ErrTimeoutRejected, &resilience.RateLimitRejectedError{}} {
		if !m.closesConnection(err) || strings.Join(connection(err), ",") != "close" {
			t.Errorf("draining, the answer to %v: Connection %q, want close", err, connection(err))
		}
	}

	hooked, err := New(Options{Render: func(_ error, def Response) Response {
		h := def.Header.Clone()
		h.Set("Connection", "keep-alive")
		def.Header = h
		return def
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := hooked.render(errShuttingDown); resp.Header.Get("Connection") != "keep-alive" {
		t.Fatalf("a Render hook's Connection field was replaced: %q", resp.Header["Connection"])
	}
}

// TestDrainClosesConnections protects a drain that moves clients on real
// loopback connections: once Drain started, the 503 shutting-down on a
// kept-alive HTTP/1.1 connection says Connection: close and the server
// closes the connection after it; on HTTP/2 (h2c) net/http drops the field
// and sends GOAWAY, so the connection ends without the client closing it.
func TestDrainClosesConnections(t *testing.T) {
	m, err := New(Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("a request ran while draining")
	})))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	closed := trackClosed(srv)
	srv.Start()
	defer srv.Close()

	t.Run("http1", func(t *testing.T) {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"shutting-down"`) || !resp.Close {
			t.Fatalf("%d %s, Close %v: want a 503 shutting-down with Connection: close", resp.StatusCode, body, resp.Close)
		}
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("reading after the 503: %v, want EOF (the server closed the connection)", err)
		}
	})

	t.Run("h2c", func(t *testing.T) {
		c := newH2CGet(srv.URL)
		defer c.tr.CloseIdleConnections()
		resp, err := c.do()
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusServiceUnavailable || resp.Header["Connection"] != nil {
			t.Fatalf("%s %d, Connection %q: want an HTTP/2 503 without the field", resp.Proto, resp.StatusCode, resp.Header["Connection"])
		}
		// Nothing but the GOAWAY ends this connection: the transport keeps
		// idle connections 90 s and the server has no idle timeout.
		closed.wait(t, c.client, "the HTTP/2 connection stayed open after the 503 shutting-down (no GOAWAY)")
	})
}

// TestDrainTimeoutClosesConnection protects the 504 at a deadline that
// passes while the middleware drains, on HTTP/2 (on HTTP/1 every 504 whose
// handler runs on closes its connection already): without a Render hook it
// is a constant answer, yet it ends its connection like the 503s (net/http
// sends GOAWAY for its Connection: close), on a real h2c connection.
func TestDrainTimeoutClosesConnection(t *testing.T) {
	m, err := New(Options{Timeout: 2 * time.Second, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	srv := httptest.NewUnstartedServer(m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(entered)
		<-release // ignores its context: runs on past its 504
	})))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	closed := trackClosed(srv)
	srv.Start()
	defer srv.Close()
	c := newH2CGet(srv.URL)
	defer c.tr.CloseIdleConnections()

	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := c.do()
		if err != nil {
			t.Error(err)
			close(answered)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered <- resp
	}()
	<-entered
	drained := make(chan error, 1)
	go func() { drained <- m.Drain(context.Background()) }() // long before the 2 s deadline
	resp := <-answered
	if resp == nil || resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("%v: want the 504 at the deadline", resp)
	}
	once.Do(func() { close(release) })
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	closed.wait(t, c.client, "the HTTP/2 connection stayed open after the 504 while draining (no GOAWAY)")
}

// closedConns records the connections a server closed, by the client's
// address; trackClosed installs it on a server not yet started.
type closedConns struct {
	mu     sync.Mutex
	closed map[string]bool
}

func trackClosed(srv *httptest.Server) *closedConns {
	c := &closedConns{closed: map[string]bool{}}
	srv.Config.ConnState = func(conn net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			c.mu.Lock()
			c.closed[conn.RemoteAddr().String()] = true
			c.mu.Unlock()
		}
	}
	return c
}

// wait polls until the server closed client's connection, failing t with
// stayedOpen when that takes 10 s.
func (c *closedConns) wait(t *testing.T, client, stayedOpen string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		done := c.closed[client]
		c.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(stayedOpen)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// h2cGet is a GET of a URL over h2c (HTTP/2 with prior knowledge) that
// notes the client's address once it has its connection: do sends it,
// then client names the connection for closedConns.wait.
type h2cGet struct {
	tr     *http.Transport
	req    *http.Request
	client string
}

func newH2CGet(url string) *h2cGet {
	g := &h2cGet{tr: &http.Transport{Protocols: new(http.Protocols)}}
	g.tr.Protocols.SetUnencryptedHTTP2(true)
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		g.client = i.Conn.LocalAddr().String()
	}})
	g.req, _ = http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	return g
}

func (g *h2cGet) do() (*http.Response, error) {
	return (&http.Client{Transport: g.tr}).Do(g.req)
}
