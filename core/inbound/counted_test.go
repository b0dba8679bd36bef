package inbound

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// A request whose deadline passes while its handler ignores its context
// counts as timed out the moment its answer goes out, not when the
// handler returns: a handler that hangs still shows in RequestCounts (and
// so in /debug/limits, the OTel requests counter and the timeout alert),
// counted once, while it is late and keeps its permit. When it returns it
// counts nothing more, and the counts still add up to the requests sent.
//
// Real loopback servers (HTTP/1.1 and h2c) for the net/http entry points;
// ExecuteInPlace as fiber and gRPC use it.
func TestHungHandlerCountedTimedOutBeforeItReturns(t *testing.T) {
	opts := func() Options {
		return Options{Timeout: 50 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2}}
	}
	for _, h2 := range []bool{false, true} {
		name := "Handler/HTTP1"
		if h2 {
			name = "Handler/h2c"
		}
		t.Run(name, func(t *testing.T) {
			m := mustNew(t, opts())
			release := make(chan struct{})
			returned := make(chan struct{})
			srv := httptest.NewUnstartedServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(returned)
				<-release // ignores its context
			})))
			c := startCounted(t, srv, h2)
			defer srv.Close()
			resp, err := c.Get(srv.URL)
			if err != nil {
				close(release)
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			checkCountedWhileLate(t, m, resp.StatusCode, release, returned)
		})
	}
	t.Run("ServeAnswering/h2c", func(t *testing.T) {
		m := mustNew(t, opts())
		release := make(chan struct{})
		returned := make(chan struct{})
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			err := m.serveAnswering(w, r, r, func(w http.ResponseWriter, r *http.Request, _ any) {
				defer close(returned)
				<-release
			}, time.Time{}, endAnswer{})
			if err != nil {
				t.Error(err)
			}
		}))
		c := startCounted(t, srv, true)
		defer srv.Close()
		resp, err := c.Get(srv.URL)
		if err != nil {
			close(release)
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "ANSWER" {
			t.Errorf("body %q, want the answerer's", body)
		}
		checkCountedWhileLate(t, m, http.StatusGatewayTimeout, release, returned)
	})
	t.Run("ExecuteInPlace", func(t *testing.T) {
		m := mustNew(t, opts())
		release := make(chan struct{})
		returned := make(chan struct{})
		expired := make(chan struct{})
		go func() {
			defer close(returned)
			_ = m.executeInPlace(context.Background(), nil, func(context.Context) error {
				<-release
				return nil
			}, func(error) { close(expired) })
		}()
		<-expired
		checkCountedWhileLate(t, m, http.StatusGatewayTimeout, release, returned)
	})
}

// startCounted starts srv over HTTP/1.1 or h2c and returns its client.
func startCounted(t *testing.T, srv *httptest.Server, h2 bool) *http.Client {
	if !h2 {
		srv.Start()
		return srv.Client()
	}
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// checkCountedWhileLate checks, after the answer, that the request counts
// timed out once while its handler (blocked on release) is late and holds
// its permit, then releases it and checks that its return adds nothing.
func checkCountedWhileLate(t *testing.T, m *Middleware, status int, release, returned chan struct{}) {
	t.Helper()
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()
	if status != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504 at the deadline", status)
	}
	s := m.Stats()
	if s.TimedOut != 1 || s.Requests != 1 {
		t.Errorf("before the handler returns: %+v, want timedOut 1 of 1", s.RequestCounts)
	}
	if s.Late != 1 || s.InFlight != 1 {
		t.Errorf("before the handler returns: late %d, in flight %d; want 1 and 1 (the permit is held)", s.Late, s.InFlight)
	}
	open()
	<-returned
	// The permit returns as the handler's call unwinds, just after it.
	for i := 0; m.Stats().InFlight != 0; i++ {
		if i > 500 {
			t.Fatal("the late handler's permit was not returned")
		}
		time.Sleep(2 * time.Millisecond)
	}
	s = m.Stats()
	if s.TimedOut != 1 || s.Requests != 1 || s.Late != 0 {
		t.Errorf("after the handler returned: %+v late %d, want timedOut 1 of 1, late 0", s.RequestCounts, s.Late)
	}
}
