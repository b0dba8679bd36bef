package conformance

import (
	"io"
	"net/http"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

var http2Cases = []Case{
	{
		Name: "timeout-http2-clean-end",
		Explanation: "Over HTTP/2 (h2c, prior knowledge), a handler that ignores its context still gets its client a complete 504 " +
			"TIMEOUT on time, and the 504's stream ends cleanly (END_STREAM, no RST_STREAM after it): real clients report a reset " +
			"stream as an error (curl exits 92, Go's client returns a stream error after the body). The handler is held until " +
			"the 504 arrived, and keeps its permit meanwhile.",
		Requires: CapHTTP2,
		Pinned:   "the server does not speak HTTP/2: a request with HTTP/2 prior knowledge fails.",
		run:      caseTimeoutHTTP2,
		pinned:   caseTimeoutHTTP2Pinned,
	},
}

// h2cClient speaks HTTP/2 without TLS, with prior knowledge.
func h2cClient() (*http.Client, *http.Transport) {
	tr := &http.Transport{Protocols: new(http.Protocols), DisableCompression: true}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}, tr
}

// doWith sends q with c and reads the whole response: a stream reset
// after the body is the read's error.
func (s *server) doWith(c *http.Client, q req) (result, int) {
	s.t.Helper()
	r, cancel := s.newRequest(q)
	defer cancel()
	start := time.Now()
	resp, err := c.Do(r)
	if err != nil {
		return result{err: s.stoppedErr(err), elapsed: time.Since(start)}, 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: body, err: s.stoppedErr(err), elapsed: time.Since(start)}, resp.ProtoMajor
}

func caseTimeoutHTTP2(t *caseT, e *env) {
	h := e.holder(false)
	const timeout = 200 * time.Millisecond
	s := e.start(limited(timeout, resilience.ConcurrencyLimiterOptions{PermitLimit: 1}), h)
	c, tr := h2cClient()
	defer tr.CloseIdleConnections()
	done := make(chan struct{})
	var r result
	var proto int
	go func() {
		defer close(done)
		r, proto = s.doWith(c, req{path: "/held?id=a"})
	}()
	h.waitEntered("a")
	<-done // the handler is still held: the 504, and its stream's end, come without it
	if r.err != nil {
		t.Fatalf("HTTP/2 request to a handler past its deadline: %v (a stream reset after the 504 is this error)", r.err)
	}
	if proto != 2 {
		t.Fatalf("response over HTTP/%d, want HTTP/2 (h2c)", proto)
	}
	expectRejection(t, "HTTP/2 request a (handler ignores its context)", r, http.StatusGatewayTimeout, "TIMEOUT", "")
	if st := s.Stats(); st.InFlight != 1 {
		t.Errorf("stats after the 504 with the handler still running: %+v, want InFlight 1", st)
	}
	h.release("a")
	h.waitExited("a")
	s.waitIdle("after the timed-out handler returned")
	h.release("b")
	r, _ = s.doWith(c, req{path: "/held?id=b"})
	expectOK(t, "HTTP/2 request b on the same connection after the permit came back", r, "done b")
}

func caseTimeoutHTTP2Pinned(t *caseT, e *env) {
	s := e.start(limited(200*time.Millisecond, resilience.ConcurrencyLimiterOptions{PermitLimit: 1}), okHandler)
	c, tr := h2cClient()
	defer tr.CloseIdleConnections()
	if r, proto := s.doWith(c, req{path: "/ok"}); r.err == nil {
		t.Errorf("an HTTP/2 request got %v over HTTP/%d; the adapter declares HTTP/2 missing", r, proto)
	}
}
