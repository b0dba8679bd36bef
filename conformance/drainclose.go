package conformance

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

var drainCases = []Case{
	{
		Name: "shutting-down-closes-connection",
		Explanation: "A 503 shutting-down (queued when the limiter closed, as Drain closes it, and arriving after) carries " +
			"Connection: close and the server closes the kept-alive HTTP/1.1 connection after it, so the client's next " +
			"request opens a connection the load balancer sends to another instance.",
		Requires: CapCloseOnShutdown,
		Pinned:   "the 503 shutting-down keeps its connection open (the protocol moves clients another way, as gRPC's GOAWAY at GracefulStop)",
		run:      func(t *caseT, e *env) { caseShutdownClosesConnection(t, e, true) },
		pinned:   func(t *caseT, e *env) { caseShutdownClosesConnection(t, e, false) },
	},
}

// startShutDown starts a server with opts (its Timeout, Pipeline and
// LimiterStats set here) whose one-permit limiter (queue of one) is closed
// as Middleware.Drain closes it, with request run holding the permit in h
// and request q queued behind it. It returns the server, the holder, and
// the two requests' results: q's is the 503 shutting-down, run's waits
// for h.release("run").
func startShutDown(t *caseT, e *env, opts inbound.Options) (s *server, h *holder, run, q <-chan result) {
	t.Helper()
	l, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: long})
	if err != nil {
		t.Fatalf("limiter: %v", err)
	}
	p, err := resilience.NewBuilder[struct{}]().AddStrategy(l).Build()
	if err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	h = e.holder(false)
	opts.Timeout, opts.Pipeline, opts.LimiterStats = long, p, l.Stats
	s = e.start(opts, h)
	run = s.send(req{path: "/held?id=run"})
	h.waitEntered("run")
	q = s.send(req{path: "/held?id=q"})
	s.waitQueued("q", 1)
	l.Close()
	return s, h, run, q
}

// caseShutdownClosesConnection closes the limiter as Middleware.Drain
// does, with a request queued, then sends a request on a kept-alive
// HTTP/1.1 connection of its own and reads what the server does with the
// connection after the 503.
func caseShutdownClosesConnection(t *caseT, e *env, wantClose bool) {
	s, h, run, q := startShutDown(t, e, inbound.Options{})

	r := s.await("request q", q)
	expectRejection(t, "request q (queued when the limiter closed)", r, http.StatusServiceUnavailable, "BULKHEAD_FULL", string(resilience.ReasonShuttingDown))
	expectConnectionClose(t, "request q (queued when the limiter closed)", r, wantClose)

	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(s.URL, "http://"), waitDeadline)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(requestDeadline))
	br := bufio.NewReader(conn)
	r = rawGet(conn, br, "/held?id=n")
	expectRejection(t, "request n (arrived after it closed)", r, http.StatusServiceUnavailable, "BULKHEAD_FULL", string(resilience.ReasonShuttingDown))
	expectConnectionClose(t, "request n (arrived after it closed)", r, wantClose)
	if wantClose {
		// The server closes its side: the next read ends, with nothing
		// more sent.
		if b, err := br.ReadByte(); err == nil {
			t.Errorf("request n: the connection stayed open after Connection: close (read %q)", b)
		} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
			t.Errorf("request n: reading after the answer: %v, want the connection closed", err)
		}
	} else {
		r = rawGet(conn, br, "/held?id=n2")
		expectRejection(t, "request n2 (on request n's connection)", r, http.StatusServiceUnavailable, "BULKHEAD_FULL", string(resilience.ReasonShuttingDown))
	}

	h.release("run")
	expectOK(t, "request run", s.await("request run", run), "done run")
	h.notEntered("rejected requests must never run")
	s.waitIdle("after the shutting-down rejections")
}

// rawGet sends a GET for path on conn, an HTTP/1.1 connection the client
// wants kept alive, and reads the whole answer.
func rawGet(conn net.Conn, br *bufio.Reader, path string) result {
	start := time.Now()
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, conn.RemoteAddr()); err != nil {
		return result{err: err}
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return result{err: err, elapsed: time.Since(start)}
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return result{status: resp.StatusCode, header: resp.Header, body: body, err: err, elapsed: time.Since(start), close: resp.Close}
}

// expectConnectionClose checks that r said Connection: close when
// wantClose, and did not otherwise.
func expectConnectionClose(t *caseT, what string, r result, wantClose bool) {
	t.Helper()
	if r.err != nil {
		return // expectRejection reported it
	}
	switch {
	case wantClose && !r.close:
		t.Errorf("%s: no Connection: close (Connection %q)", what, r.header.Values("Connection"))
	case !wantClose && r.close:
		t.Errorf("%s: Connection: close, pinned to keep the connection", what)
	}
}

// isReset reports a connection reset by the peer, which a server that
// closes with unread bytes may cause instead of a clean EOF.
func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}
