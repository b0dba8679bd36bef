package inbound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// Every outcome maps to its status and code, bodies are valid JSON with
// the documented fields, and no internal error text reaches a client.
func TestRenderDefault(t *testing.T) {
	m := mustNew(t, Options{})
	secret := errors.New("db password is hunter2")
	cases := []struct {
		err    error
		status int
		code   string
		reason string
		send   bool
	}{
		{&resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonFull}, 503, CodeBulkheadFull, "full", true},
		{&resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonQueueTimeout}, 503, CodeBulkheadFull, "queue-timeout", true},
		{fmt.Errorf("wrapped: %w", &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonDropped}), 503, CodeBulkheadFull, "dropped", true},
		{&resilience.TimeoutRejectedError{Timeout: time.Second}, 504, CodeTimeout, "", true},
		{context.DeadlineExceeded, 504, CodeTimeout, "", true},
		{&resilience.RateLimitRejectedError{RetryAfter: time.Second, Limit: 5, Reset: time.Second}, 429, CodeRateLimited, "", true},
		{fmt.Errorf("wrapped: %w", &resilience.RateLimitRejectedError{RetryAfter: time.Second}), 429, CodeRateLimited, "", true},
		{fmt.Errorf("breaker: %w (%w)", resilience.ErrRejected, secret), 503, CodeRejected, "", true},
		{&resilience.RateLimitStoreError{Policy: "p", Err: secret}, 503, CodeRejected, "", true},
		{secret, 500, CodeInternal, "", true},
		{context.Canceled, 0, "", "", false},
		{nil, 0, "", "", false},
	}
	for _, c := range cases {
		resp, ok := m.render(c.err)
		if ok != c.send {
			t.Errorf("%v: send = %v", c.err, ok)
			continue
		}
		if !ok {
			continue
		}
		var body struct {
			StatusCode int    `json:"statusCode"`
			Error      string `json:"error"`
			Message    string `json:"message"`
			Code       string `json:"code"`
			Reason     string `json:"reason"`
		}
		if err := json.Unmarshal(resp.Body, &body); err != nil {
			t.Errorf("%v: body %s: %v", c.err, resp.Body, err)
			continue
		}
		if resp.Status != c.status || body.StatusCode != c.status || body.Code != c.code || body.Reason != c.reason ||
			body.Error != http.StatusText(c.status) || body.Message == "" {
			t.Errorf("%v: got %d %s", c.err, resp.Status, resp.Body)
		}
		if resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%v: header %v", c.err, resp.Header)
		}
		if strings.Contains(string(resp.Body), "hunter2") || strings.Contains(string(resp.Body), "resilience:") {
			t.Errorf("%v: internal text in body %s", c.err, resp.Body)
		}
	}
}

// Retry-After is whole seconds, rounded up, and at least 1.
func TestRetryAfterRoundsUp(t *testing.T) {
	m := mustNew(t, Options{})
	for d, want := range map[time.Duration]string{
		0:                       "1",
		time.Millisecond:        "1",
		time.Second:             "1",
		1500 * time.Millisecond: "2",
		2 * time.Second:         "2",
		59*time.Second + 1:      "60",
	} {
		resp, _ := m.render(&resilience.RateLimitRejectedError{RetryAfter: d, Limit: 1, Reset: d})
		if got := resp.Header.Get("Retry-After"); got != want {
			t.Errorf("RetryAfter %v: Retry-After = %q, want %q", d, got, want)
		}
	}
}

// The render hook sees the error and the default, and what it returns is
// what the client gets, on the middleware and from Render.
func TestRenderHook(t *testing.T) {
	var seen error
	m := mustNew(t, Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
		Render: func(err error, def Response) Response {
			seen = err
			h := def.Header.Clone()
			h.Set("Content-Type", "text/plain")
			h.Set("X-Reason", "shed")
			return Response{Status: def.Status, Header: h, Body: []byte("busy\n")}
		},
	})
	held, ok := m.Limiter().TryAcquire()
	if !ok {
		t.Fatal("could not take the permit")
	}
	defer held.Release()
	w := httptest.NewRecorder()
	m.Handler(okHandler).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != 503 || w.Body.String() != "busy\n" || w.Header().Get("X-Reason") != "shed" ||
		w.Header().Get("Content-Type") != "text/plain" || w.Header().Get("Content-Length") != "5" {
		t.Fatalf("got %d %v %q", w.Code, w.Header(), w.Body)
	}
	if !errors.Is(seen, resilience.ErrConcurrencyLimitRejected) {
		t.Fatalf("hook saw %v", seen)
	}
	// The shared default was not modified by the hook.
	if respFull.Header.Get("X-Reason") != "" {
		t.Fatal("default header changed")
	}
	// No hook call when nothing is sent.
	seen = nil
	if _, ok := m.render(context.Canceled); ok || seen != nil {
		t.Fatal("rendered a response for a gone client")
	}
}

// A render hook that returns an invalid status must not make every
// rejection panic: the default response is sent instead.
func TestRenderHookInvalidStatusFallsBack(t *testing.T) {
	for _, status := range []int{0, 99, 1000, -1} {
		m := mustNew(t, Options{
			Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
			Render:      func(error, Response) Response { return Response{Status: status, Body: []byte("x")} },
		})
		held, ok := m.Limiter().TryAcquire()
		if !ok {
			t.Fatal("could not take the permit")
		}
		w := httptest.NewRecorder()
		m.Handler(okHandler).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		held.Release()
		if w.Code != 503 || w.Body.String() != string(respFull.Body) {
			t.Fatalf("status %d: got %d %q, want the default 503", status, w.Code, w.Body)
		}
	}
}

// problemRender renders every rejection as problem+json with an extra
// field, as a service with its own error format does.
func problemRender(err error, def Response) Response {
	h := http.Header{"Content-Type": {"application/problem+json"}, "X-Rendered": {"yes"}}
	return Response{Status: def.Status, Header: h, Body: []byte(`{"status":` + strconv.Itoa(def.Status) + `}`)}
}

// Render is called for every rejection, the 504 sent at the deadline
// included: a handler that ignores its context still gets the service's
// own format, complete, while it is still running.
func TestRenderHookRendersTheDeadline504(t *testing.T) {
	m := mustNew(t, Options{Timeout: 50 * time.Millisecond, Render: problemRender})
	release := make(chan struct{})
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Handler", "1")
		<-release // ignores its context
	})))
	defer srv.Close()
	defer close(release)
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 504 || string(body) != `{"status":504}` ||
		resp.Header.Get("Content-Type") != "application/problem+json" || resp.Header.Get("X-Rendered") != "yes" ||
		resp.Header.Get("X-Handler") != "" || resp.ContentLength != int64(len(body)) {
		t.Fatalf("got %d %v %q %v, want the rendered 504", resp.StatusCode, resp.Header, body, err)
	}
}

// A Render hook that panics stays in its request: the default response is
// sent (on the request's goroutine and on the deadline's timer alike) and
// the panic is reported as event.HookPanic.
func TestRenderHookPanicIsContained(t *testing.T) {
	var mu sync.Mutex
	var events []event.Event
	lis := event.ListenerFunc(func(_ context.Context, e event.Event) {
		if e.Name == event.HookPanic {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}
	})
	m := mustNew(t, Options{
		Timeout:     50 * time.Millisecond,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
		Listener:    lis,
		Render:      func(error, Response) Response { panic("render bug") },
	})
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	entered := make(chan struct{}, 1)
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	})))
	defer srv.Close()
	defer open()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer c.CloseIdleConnections()
	get := func() (int, string) {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	// The 504 at the deadline, rendered on the timer's goroutine.
	if code, body := get(); code != 504 || body != string(respTimeout.Body) {
		t.Fatalf("deadline: got %d %q, want the default 504", code, body)
	}
	<-entered
	// The 503 while the late handler holds the permit.
	if code, body := get(); code != 503 || body != string(respFull.Body) {
		t.Fatalf("rejection: got %d %q, want the default 503", code, body)
	}
	open()
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || events[0].Reason != event.HookRender || events[0].Strategy != "Render" {
		t.Fatalf("events = %+v, want two %s for %s", events, event.HookPanic, event.HookRender)
	}
	var hp *resilience.HookPanicError
	if !errors.As(events[1].Err, &hp) || hp.Value != "render bug" {
		t.Fatalf("event error %v, want the *HookPanicError", events[1].Err)
	}
}
