package conformance

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

var streamingCases = []Case{
	{
		Name: "sse-flush",
		Explanation: "Server-sent events flush through the middleware: the first event reaches the client while the handler is " +
			"still held before the second, through http.ResponseController's Flush (the middleware's writer unwraps to a flusher).",
		Requires: CapStreaming,
		Pinned:   "the events are delivered whole when the handler returns: the body is both events, in order.",
		run:      func(t *caseT, e *env) { caseSSE(t, e, false) },
		pinned:   func(t *caseT, e *env) { caseSSE(t, e, true) },
	},
	{
		Name: "streaming-deadline-aborts",
		Explanation: "A response already flushed is committed: when the deadline passes afterwards the middleware cannot send a " +
			"504, so it aborts the connection: the client sees the stream end with an error, never a clean end of body, and " +
			"what the handler writes after the deadline does not arrive. (The handler stops at its deadline here; one that " +
			"ignores it keeps the connection until it returns, since net/http cannot close a connection under a running handler.)",
		Requires: CapStreaming,
		Pinned: "nothing was committed (the framework buffers), so the client gets a complete 504 TIMEOUT at the deadline " +
			"(when the handler returns, if on-time-504 is missing too: the handler stops at its deadline then).",
		run:    func(t *caseT, e *env) { caseStreamingDeadline(t, e, false) },
		pinned: func(t *caseT, e *env) { caseStreamingDeadline(t, e, true) },
	},
}

const (
	event1 = "data: one\n\n"
	event2 = "data: two\n\n"
)

// sseHandler writes event1, flushes, waits for g (and, when watch is set,
// for its context to end), then writes event2. flushErr reports the first
// flush.
func sseHandler(g *gate, watch bool, flushErr chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = io.WriteString(w, event1)
		flushErr <- http.NewResponseController(w).Flush()
		if watch {
			select {
			case <-g.ch:
			case <-r.Context().Done():
			}
		} else {
			<-g.ch
		}
		_, _ = io.WriteString(w, event2)
		_ = http.NewResponseController(w).Flush()
	})
}

// openStream starts a GET and returns the response with its body unread.
func openStream(t *caseT, s *server, path string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancelTimeout := context.WithTimeout(context.Background(), waitDeadline)
	stop := context.AfterFunc(t.Decided(), cancelTimeout) // a failed case reads no further
	cancel := func() { stop(); cancelTimeout() }
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		cancel()
		t.Fatalf("building request: %v", err)
	}
	resp, err := s.client.Do(r)
	if err != nil {
		cancel()
		if t.Decided().Err() != nil {
			t.stopWaiting("GET " + path)
		}
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp, func() { resp.Body.Close(); cancel() }
}

func caseSSE(t *caseT, e *env, pinned bool) {
	g := e.gate()
	flushErr := make(chan error, 1)
	s := e.start(limited(long, resilience.ConcurrencyLimiterOptions{PermitLimit: 1}), sseHandler(g, false, flushErr))
	if pinned {
		g.open()
		r := s.do(req{path: "/events"})
		expectOK(t, "event stream", r, event1+event2)
		s.waitIdle("after the stream")
		return
	}
	resp, done := openStream(t, s, "/events")
	defer done()
	if err := receive(t, "the handler's flush", flushErr); err != nil {
		t.Errorf("http.ResponseController.Flush through the middleware: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("event stream status %d, want 200", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("event stream Content-Type %q, want text/event-stream", ct)
	}
	br := bufio.NewReader(resp.Body)
	// The handler is held on the gate: event1 can only arrive by the flush.
	got, err := readEvent(br)
	if err != nil && t.Decided().Err() != nil {
		t.stopWaiting("reading the first event")
	}
	if err != nil || got != event1 {
		t.Fatalf("first event before the handler went on: %q, %v; want %q", got, err, event1)
	}
	g.open()
	rest, err := io.ReadAll(br)
	if err != nil && t.Decided().Err() != nil {
		t.stopWaiting("reading the rest of the stream")
	}
	if err != nil || string(rest) != event2 {
		t.Errorf("rest of the stream: %q, %v; want %q", rest, err, event2)
	}
	done()
	s.waitIdle("after the stream")
}

func readEvent(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), err
		}
		if line == "\n" {
			return b.String(), nil
		}
	}
}

func caseStreamingDeadline(t *caseT, e *env, pinned bool) {
	const timeout = 300 * time.Millisecond
	g := e.gate()
	flushErr := make(chan error, 1)
	// Without an answer at the deadline (CapOnTime504), the buffered
	// stream's 504 can only come when the handler returns: it stops at its
	// deadline here.
	_, late := e.h.Missing[CapOnTime504]
	s := e.start(limited(timeout, resilience.ConcurrencyLimiterOptions{PermitLimit: 1}), sseHandler(g, !pinned || late, flushErr))
	if pinned {
		r := s.do(req{path: "/events"})
		expectRejection(t, "stream past its deadline (buffered)", r, http.StatusGatewayTimeout, "TIMEOUT", "")
		g.open()
		s.waitIdle("after the timed-out stream")
		return
	}
	resp, done := openStream(t, s, "/events")
	defer done()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("event stream status %d, want 200 (committed before the deadline)", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	got, err := readEvent(br)
	if err != nil && t.Decided().Err() != nil {
		t.stopWaiting("reading the first event")
	}
	if err != nil || got != event1 {
		t.Fatalf("first event: %q, %v; want %q", got, err, event1)
	}
	// The handler writes event2 when its deadline ends its context; the
	// stream must end with an error and without it.
	rest, err := io.ReadAll(br)
	if err != nil && t.Decided().Err() != nil {
		t.stopWaiting("reading the stream past its deadline")
	}
	switch {
	case err == nil:
		t.Errorf("stream past its deadline ended cleanly after %q; want the connection aborted (an error)", rest)
	case errors.Is(err, context.DeadlineExceeded):
		t.Errorf("stream not aborted within %v of the %v deadline (the client's own deadline ended it)", waitDeadline, timeout)
	}
	if len(rest) > 0 {
		t.Errorf("the client received %q after the deadline; a committed response must get nothing more", rest)
	}
	g.open()
	done()
	s.waitIdle("after the aborted stream")
}
