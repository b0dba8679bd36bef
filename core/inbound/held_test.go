package inbound

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
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
			if err != nil || resp.StatusCode != 504 || string(body) != string(respTimeout.Body) || resp.Header.Get("X-Handler") != "" {
				t.Fatalf("got %d %q %v (X-Handler %q), want the 504", resp.StatusCode, body, err, resp.Header.Get("X-Handler"))
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

// Over HTTP/2 the 504 reaches the client at the deadline and its stream
// ends then (the late handler does not hold the client), and the 504 does
// not tear down the connection its other streams share.
func TestServerHTTP2TimeoutEndsStreamKeepsConnection(t *testing.T) {
	m := mustNew(t, Options{Timeout: 100 * time.Millisecond})
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release // ignores its context
			return
		}
		io.WriteString(w, "ok")
	})))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	defer close(release)
	c := srv.Client()

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
	// The body is whole; the stream then ends (reset), while the handler
	// is still held.
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(respTimeout.Body), string(body)) || len(body) != len(respTimeout.Body) {
		t.Fatalf("504 body = %q", body)
	}
	resp, err = get("/ok")
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(reused) != 2 || !reused[1] {
		t.Fatalf("connection reuse = %v, want the second request on the same connection", reused)
	}
}

// A timeout strategy in a custom inbound pipeline reports its deadline
// (OnTimeout) like the middleware's own; a retry in it never runs the
// handler twice.
func TestCustomPipelineTimeoutEventAndSingleRun(t *testing.T) {
	var mu sync.Mutex
	var events []resilience.EventName
	lis := resilience.ListenerFunc(func(_ context.Context, e resilience.Event) {
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
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 504 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	srv.Close() // waits for the handler
	mu.Lock()
	defer mu.Unlock()
	timeouts := 0
	for _, e := range events {
		if e == resilience.EventTimeout {
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
