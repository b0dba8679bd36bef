package inbound_test

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// panicOptions are the options the panic tests run under: a limiter (its
// permit must come back) with and without a timeout (the timed writer).
func panicOptions(timeout time.Duration) inbound.Options {
	return inbound.Options{
		Timeout:      timeout,
		Concurrency:  &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Second},
		AnswerPanics: true,
	}
}

// lockedLog is a server's ErrorLog the test reads while net/http may
// still write to it (it logs a panic it lets through after the client saw
// the connection close).
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// quietServer is an httptest server whose ErrorLog goes to buf.
func quietServer(t *testing.T, h http.Handler, buf *lockedLog) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(buf, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// Under AnswerPanics a handler's panic is a 500 INTERNAL in the rejections'
// JSON format, logged with its stack, and its permit is back: the next
// request is admitted. Without the option net/http drops the connection.
func TestAnswerPanicsAnswers500AndReturnsThePermit(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Minute} {
		for _, answer := range []bool{true, false} {
			opts := panicOptions(timeout)
			opts.AnswerPanics = answer
			m, err := inbound.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			var logs lockedLog
			srv := quietServer(t, m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/panic" {
					w.Header().Set("X-Half", "set before the panic")
					panic("a handler's bug")
				}
				io.WriteString(w, "ok")
			})), &logs)
			resp, err := srv.Client().Get(srv.URL + "/panic")
			if !answer {
				if err == nil {
					resp.Body.Close()
					t.Errorf("timeout %v, off: got %d, want the connection dropped", timeout, resp.StatusCode)
				}
			} else {
				if err != nil {
					t.Fatalf("timeout %v: %v", timeout, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 500 || !strings.Contains(string(body), `"INTERNAL"`) ||
					resp.Header.Get("Content-Type") != "application/json" || strings.Contains(string(body), "bug") {
					t.Errorf("timeout %v: %d %q %q, want a 500 INTERNAL in JSON without the panic's text", timeout, resp.StatusCode, resp.Header.Get("Content-Type"), body)
				}
				if !strings.Contains(logs.String(), "a handler's bug") || !strings.Contains(logs.String(), "panics_test.go") {
					t.Errorf("timeout %v: the log lacks the value or the stack:\n%s", timeout, logs.String())
				}
			}
			if st := m.Stats(); st.InFlight != 0 {
				t.Errorf("timeout %v, answer %v: %d in flight after the panic, want 0", timeout, answer, st.InFlight)
			}
			resp, err = srv.Client().Get(srv.URL + "/ok")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("timeout %v, answer %v: the next request: %v %v", timeout, answer, resp, err)
			}
			resp.Body.Close()
		}
	}
}

// A panic after the response started cannot be answered: it goes on, and
// the client sees a cut response, never a 500 glued to the 200; an
// http.ErrAbortHandler goes on too.
func TestAnswerPanicsLeavesStartedResponsesAndAborts(t *testing.T) {
	m, err := inbound.New(panicOptions(0))
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedLog
	srv := quietServer(t, m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/abort" {
			panic(http.ErrAbortHandler)
		}
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		panic("after the start")
	})), &logs)
	resp, err := srv.Client().Get(srv.URL + "/started")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || err == nil || strings.Contains(string(body), "INTERNAL") {
		t.Errorf("started: %d %q (read error %v), want the 200 cut short", resp.StatusCode, body, err)
	}
	if _, err := srv.Client().Get(srv.URL + "/abort"); err == nil {
		t.Error("abort: got an answer, want the connection dropped")
	}
	if strings.Contains(logs.String(), "answered 500") {
		t.Errorf("a panic that could not be answered was logged as answered:\n%s", logs.String())
	}
}

// Over HTTP/2 with a timeout the handler runs detached from ServeHTTP's
// goroutine; its panic is answered all the same, on the stream.
func TestAnswerPanicsOverH2C(t *testing.T) {
	m, err := inbound.New(panicOptions(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedLog
	srv := httptest.NewUnstartedServer(m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("a handler's bug") })))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Config.ErrorLog = log.New(&logs, "", 0)
	srv.Start()
	defer srv.Close()
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 500 || !strings.Contains(string(body), `"INTERNAL"`) {
		t.Errorf("%s %d %q, want a 500 INTERNAL over HTTP/2", resp.Proto, resp.StatusCode, body)
	}
	if st := m.Stats(); st.InFlight != 0 {
		t.Errorf("%d in flight after the panic, want 0", st.InFlight)
	}
}
