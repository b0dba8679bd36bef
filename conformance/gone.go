package conformance

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

var goneCases = []Case{
	{
		Name: "gone-client-never-200",
		Explanation: "A client that half-closes its connection (net/http then takes it for gone and cancels the request's context) " +
			"while its request is queued, or while its handler runs and then returns without writing, never reads a 2xx: " +
			"the connection is aborted with nothing written, or (where the framework does not notice) the request is " +
			"answered by the queue timeout or the inbound timeout. An implicit empty 200 would tell it the request succeeded. " +
			"A 2xx is only ever the handler's own.",
		run: caseGoneClientNever200,
	},
}

// silent answers "ok" on /ok, holds /held until its gate opens, and on
// /quiet waits for its context to end and returns without writing.
type silent struct{ g *gate }

func (s silent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/held":
		<-s.g.ch
		_, _ = io.WriteString(w, "done")
	case "/quiet":
		select {
		case <-r.Context().Done():
		case <-s.g.ch:
		}
	default:
		_, _ = io.WriteString(w, "ok")
	}
}

// halfClosed sends GET path on a raw connection, runs sent, half-closes
// the connection's write side and returns the status line it then reads
// ("" when the connection ends with nothing written).
func halfClosed(t *caseT, url, path string, sent func()) string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatalf("dialing the server: %v", err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: conformance\r\n\r\n"); err != nil {
		t.Fatalf("writing the request: %v", err)
	}
	sent()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_ = conn.SetReadDeadline(time.Now().Add(requestDeadline))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line)
}

func is2xx(statusLine string) bool {
	f := strings.Fields(statusLine)
	return len(f) > 1 && strings.HasPrefix(f[1], "2")
}

func caseGoneClientNever200(t *caseT, e *env) {
	g := e.gate()
	const qt, timeout = 500 * time.Millisecond, time.Second
	s := e.start(limited(timeout, resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: qt}), silent{g})
	held := s.send(req{path: "/held?id=held"})
	s.waitStats("the permit held", func(st inbound.Stats) bool { return st.InFlight == 1 })
	got := halfClosed(t, s.URL, "/ok", func() {
		s.waitStats("the half-closed request queued", func(st inbound.Stats) bool { return st.Queued == 1 })
	})
	if is2xx(got) {
		t.Errorf("queued client that half-closed read %q, want nothing (aborted) or a non-2xx", got)
	}
	s.waitStats("the queue place freed", func(st inbound.Stats) bool { return st.Queued == 0 })
	g.open()
	expectOK(t, "the held request", s.await("the held request", held), "done")
	s.waitIdle("after the queued client left")

	g2 := e.gate()
	s2 := e.start(limited(timeout, resilience.ConcurrencyLimiterOptions{PermitLimit: 1}), silent{g2})
	got = halfClosed(t, s2.URL, "/quiet", func() {
		s2.waitStats("the half-closed request running", func(st inbound.Stats) bool { return st.InFlight == 1 })
	})
	if is2xx(got) {
		t.Errorf("running client that half-closed, whose handler wrote nothing, read %q, want nothing (aborted) or a non-2xx", got)
	}
	s2.waitIdle("after the running client left")
}
