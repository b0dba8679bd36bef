package main

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// testServer is the reference server configured by args, on loopback.
type testServer struct {
	url    string
	mw     *inbound.Middleware
	client *http.Client
}

func startServer(t *testing.T, args ...string) *testServer {
	t.Helper()
	cfg, err := parseConfig(append([]string{"-framework", serverFramework}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := serverFuncs[cfg.framework]; ok {
		return startOwnServer(t, cfg)
	}
	h, mw, err := newServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	// Cleanups run last-in first-out: the client's idle connections go
	// first, then Close waits for every handler (late ones included).
	t.Cleanup(srv.Close)
	return &testServer{url: srv.URL, mw: mw, client: newClient(t)}
}

// startOwnServer serves a framework with a server of its own (fiber's
// fasthttp) on loopback, as run serves it.
func startOwnServer(t *testing.T, cfg config) *testServer {
	t.Helper()
	srv, mw, err := buildServer(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return &testServer{url: "http://" + ln.Addr().String(), mw: mw, client: newClient(t)}
}

// abandonTimeout is the -timeout of a test that ends its running requests
// by abandoning them: long, so the disconnect ends them, where the
// framework notices one; fasthttp (fiber) does not while a handler runs,
// so there the inbound timeout ends them, and it is short enough for the
// test to wait, long enough for the steps before it.
func abandonTimeout() string {
	if serverFramework == "fiber" {
		return "2s"
	}
	return "1m"
}

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// result is a response as a test inspects it.
type result struct {
	status int
	header http.Header
	body   map[string]any
	err    error
}

func (s *testServer) get(ctx context.Context, path string, header ...string) result {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+path, nil)
	if err != nil {
		return result{err: err}
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r := result{status: resp.StatusCode, header: resp.Header, err: err}
	if len(b) > 0 && err == nil {
		r.err = json.Unmarshal(b, &r.body)
	}
	if r.err == nil && serverFramework == "connect" && r.body["details"] != nil {
		// A rejection in Connect's error format: the same checks read its
		// ErrorInfo detail.
		r.body, r.err = connectRejection(r.status, r.body)
	}
	return r
}

// async issues the request in the background; the result arrives on the
// channel. Cancel ctx to abandon it.
func (s *testServer) async(ctx context.Context, path string, header ...string) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- s.get(ctx, path, header...) }()
	return ch
}

// expectCleanExit waits for run to return after its context was
// cancelled and fails unless it exited 0; why says what exit 0 means.
func expectCleanExit(t *testing.T, exited <-chan int, stderr *syncBuffer, why string) {
	t.Helper()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit code %d, want 0%s; stderr:\n%s", code, why, stderr.String())
		}
	case <-time.After(waitBound):
		t.Fatal("run did not return after its context was cancelled")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (s *testServer) waitIdle(t *testing.T) {
	t.Helper()
	waitFor(t, "in flight and queued to return to 0", func() bool {
		st := s.mw.Stats()
		return st.InFlight == 0 && st.Queued == 0 && st.Late == 0
	})
}

// getLimits reads /debug/limits over HTTP: its numbers, those of its
// objects ("config", "reloads", "shadow") as "config.permitLimit".
func getLimits(t *testing.T, c *http.Client, base string) map[string]int {
	t.Helper()
	resp, err := c.Get(base + "/debug/limits")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for k, v := range raw {
		switch v := v.(type) {
		case float64:
			m[k] = int(v)
		case map[string]any:
			for kk, vv := range v {
				if f, ok := vv.(float64); ok {
					m[k+"."+kk] = int(f)
				}
			}
		}
	}
	return m
}

func wantRejection(t *testing.T, r result, status int, code, reason string) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("want %d %s: %v", status, code, r.err)
	}
	if r.status != status || r.body["code"] != code || (reason != "" && r.body["reason"] != reason) {
		t.Fatalf("got %d %v, want %d code %s reason %q", r.status, r.body, status, code, reason)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
}

// Invariant: /healthz and /debug/limits are outside the middleware, so they
// answer while every permit and queue place is taken, and /debug/limits
// then reports the saturation (limit, inflight, queued).
func TestDiagnosticRoutesAnswerWhileSaturated(t *testing.T) {
	s := startServer(t, "-permit-limit", "1", "-queue-limit", "1", "-queue-timeout", "0", "-timeout", abandonTimeout())
	ctx, cancel := context.WithCancel(t.Context())
	running := s.async(ctx, "/cooperative?ms=60000")
	waitFor(t, "one running", func() bool { return s.mw.Stats().InFlight == 1 })
	queued := s.async(ctx, "/cooperative?ms=60000")
	waitFor(t, "one queued", func() bool { return s.mw.Stats().Queued == 1 })

	wantRejection(t, s.get(t.Context(), "/work?ms=0"), http.StatusServiceUnavailable, inbound.CodeBulkheadFull, "full")

	if r := s.get(t.Context(), "/healthz"); r.err != nil || r.status != http.StatusOK || r.body["status"] != "ok" {
		t.Errorf("/healthz while saturated: %d %v %v", r.status, r.body, r.err)
	}
	limits := getLimits(t, s.client, s.url)
	for key, want := range map[string]int{"limit": 1, "inflight": 1, "queued": 1} {
		if got, ok := limits[key]; !ok || got != want {
			t.Errorf("/debug/limits %q = %d (present %v), want %d; all: %v", key, got, ok, want, limits)
		}
	}

	cancel() // both clients go away: the running handler stops, the waiter leaves (with fiber: at their timeouts)
	for _, ch := range []<-chan result{running, queued} {
		if r := <-ch; !errors.Is(r.err, context.Canceled) {
			t.Errorf("abandoned request: %d %v", r.status, r.err)
		}
	}
	s.waitIdle(t)
}

// Invariant: a handler that ignores its context still gets its client a
// 504 TIMEOUT at the deadline; it keeps its permit (counted as late) until
// it really returns.
func TestWorkIgnoringContextGets504(t *testing.T) {
	s := startServer(t, "-timeout", "50ms", "-permit-limit", "2")
	wantRejection(t, s.get(t.Context(), "/work?ms=400"), http.StatusGatewayTimeout, inbound.CodeTimeout, "")
	// The 504 came while the handler was still sleeping: it is (or was)
	// late. LateTotal never decreases, so this holds however slow the test.
	waitFor(t, "the handler to be counted late", func() bool { return s.mw.Stats().LateTotal == 1 })
	s.waitIdle(t)
}

// Invariant: /cooperative stops at the deadline: a 60 s request times out
// with a 504 and its permit comes back long before 60 s.
func TestCooperativeStopsAtDeadline(t *testing.T) {
	s := startServer(t, "-timeout", "50ms")
	start := time.Now()
	wantRejection(t, s.get(t.Context(), "/cooperative?ms=60000"), http.StatusGatewayTimeout, inbound.CodeTimeout, "")
	s.waitIdle(t)
	if d := time.Since(start); d > 30*time.Second { // sanity bound, not a timing assertion
		t.Fatalf("took %v: the handler did not stop", d)
	}
}

func TestWorkRoutesRunToCompletion(t *testing.T) {
	s := startServer(t)
	for _, path := range []string{"/work?ms=1", "/cooperative?ms=1", "/work", "/cooperative?ms=0"} {
		if r := s.get(t.Context(), path); r.err != nil || r.status != http.StatusOK || r.body["worked"] == nil {
			t.Errorf("%s: %d %v %v", path, r.status, r.body, r.err)
		}
	}
}

// Bounded work: ms outside [0, 60000] or not an integer is a 400, so no
// request can hold a goroutine for long.
func TestWorkRoutesRejectBadMS(t *testing.T) {
	s := startServer(t)
	for _, path := range []string{"/work?ms=abc", "/work?ms=-1", "/work?ms=60001", "/cooperative?ms=1e3", "/cooperative?ms=99999999999999999999"} {
		if r := s.get(t.Context(), path); r.err != nil || r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %v, want 400", path, r.status, r.err)
		}
	}
}

// priorityOf ranks a request carrying X-Priority: v, as the limiter would.
func priorityOf(v string) int {
	h := http.Header{}
	if v != "" {
		h.Set(priorityHeader, v)
	}
	return requestPriority(adapt.NewContext(context.Background(), &inbound.Request{Header: h}))
}

// A client cannot put itself at the head of the queue: values outside 0-9
// rank as the default, not first.
func TestRequestPriorityIsBounded(t *testing.T) {
	for in, want := range map[string]int{
		"":                     defaultPriority,
		"0":                    0,
		"9":                    9,
		"-3":                   defaultPriority,
		"-9223372036854775808": defaultPriority,
		"10":                   defaultPriority,
		"+2":                   2,
		"abc":                  defaultPriority,
		" 1":                   defaultPriority,
		"1.5":                  defaultPriority,
		"1e2":                  defaultPriority,
		"99999999999999999999": defaultPriority, // overflows int
	} {
		if got := priorityOf(in); got != want {
			t.Errorf("X-Priority %q ranked %d, want %d", in, got, want)
		}
	}
}

// X-Priority reaches the limiter end to end. With drop-lowest-priority a
// newcomer that outranks the queued request evicts it; one that does not
// (no header, or a malformed one: the default 5) is rejected instead.
func TestPriorityHeaderDecidesEviction(t *testing.T) {
	s := startServer(t, "-permit-limit", "1", "-queue-limit", "1", "-queue-timeout", "0",
		"-overflow", "drop-lowest-priority", "-timeout", abandonTimeout())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	running := s.async(ctx, "/cooperative?ms=60000")
	waitFor(t, "one running", func() bool { return s.mw.Stats().InFlight == 1 })

	low := s.async(t.Context(), "/work?ms=0", "X-Priority", "9")
	waitFor(t, "the low-priority request queued", func() bool { return s.mw.Stats().Queued == 1 })
	high := s.async(t.Context(), "/work?ms=0", "X-Priority", "0")
	wantRejection(t, <-low, http.StatusServiceUnavailable, inbound.CodeBulkheadFull, "dropped")
	waitFor(t, "the high-priority request queued", func() bool { return s.mw.Stats().Queued == 1 })

	wantRejection(t, s.get(t.Context(), "/work?ms=0"), http.StatusServiceUnavailable, inbound.CodeBulkheadFull, "full")
	wantRejection(t, s.get(t.Context(), "/work?ms=0", "X-Priority", "urgent"), http.StatusServiceUnavailable, inbound.CodeBulkheadFull, "full")

	cancel() // the running request's client leaves (with fiber: it runs to its timeout); the queued one gets its permit
	<-running
	if r := <-high; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("high-priority request: %d %v", r.status, r.err)
	}
	s.waitIdle(t)
}

// -rate-key header:NAME partitions the rate limit by that header; a client
// over its quota gets 429 RATE_LIMITED with Retry-After, another key is
// unaffected.
func TestRateLimitByHeader(t *testing.T) {
	s := startServer(t, "-rate-limit", "2", "-rate-window", "1h", "-rate-key", "header:x-api-key")
	for i := range 2 {
		r := s.get(t.Context(), "/work?ms=0", "X-Api-Key", "a")
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("request %d: %d %v", i, r.status, r.err)
		}
		if r.header.Get("RateLimit-Limit") != "2" {
			t.Errorf("admitted response lacks RateLimit-Limit: %v", r.header)
		}
	}
	r := s.get(t.Context(), "/work?ms=0", "X-Api-Key", "a")
	wantRejection(t, r, http.StatusTooManyRequests, inbound.CodeRateLimited, "")
	if r.header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	if r := s.get(t.Context(), "/work?ms=0", "X-Api-Key", "b"); r.status != http.StatusOK {
		t.Errorf("another key: %d, want 200", r.status)
	}
	// The diagnostic routes are not rate limited.
	for range 3 {
		if r := s.get(t.Context(), "/healthz", "X-Api-Key", "a"); r.status != http.StatusOK {
			t.Fatalf("/healthz: %d", r.status)
		}
	}
}

// -rate-key ip (the default) keys on the client address: every request of
// this test comes from 127.0.0.1.
func TestRateLimitByClientIP(t *testing.T) {
	s := startServer(t, "-rate-limit", "1", "-rate-window", "1h")
	if r := s.get(t.Context(), "/work?ms=0"); r.status != http.StatusOK {
		t.Fatalf("first: %d", r.status)
	}
	wantRejection(t, s.get(t.Context(), "/work?ms=0", "X-Api-Key", "other"), http.StatusTooManyRequests, inbound.CodeRateLimited, "")
}

// Invariant: -adaptive puts the adaptive limiter in front of the work
// routes with -permit-limit as its initial limit, and /debug/limits shows
// its live limit; -codel turns on CoDel on whichever limiter is chosen.
func TestAdaptiveAndCoDelFlags(t *testing.T) {
	s := startServer(t, "-adaptive", "-codel", "-permit-limit", "7")
	if s.mw.AdaptiveLimiter() == nil || s.mw.Limiter() != nil {
		t.Fatal("-adaptive did not choose the adaptive limiter")
	}
	if r := s.get(t.Context(), "/work?ms=0"); r.err != nil || r.status != http.StatusOK {
		t.Fatalf("/work under the adaptive limiter: %d %v", r.status, r.err)
	}
	if got := getLimits(t, s.client, s.url)["limit"]; got != s.mw.AdaptiveLimiter().Stats().Limit || got < 1 {
		t.Errorf("/debug/limits limit = %d, want the adaptive limiter's live limit %d", got, s.mw.AdaptiveLimiter().Stats().Limit)
	}

	for _, args := range [][]string{{"-adaptive", "-codel"}, {"-codel"}} {
		cfg, err := parseConfig(append(args, "-permit-limit", "7"), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		opts := inboundOptions(cfg)
		switch {
		case cfg.adaptive && (opts.Adaptive == nil || opts.Adaptive.InitialLimit != 7 || opts.Adaptive.CoDel == nil):
			t.Errorf("%v: adaptive options %+v", args, opts.Adaptive)
		case !cfg.adaptive && (opts.Concurrency == nil || opts.Concurrency.PermitLimit != 7 || opts.Concurrency.CoDel == nil):
			t.Errorf("%v: concurrency options %+v", args, opts.Concurrency)
		}
	}
}

// The reference server closes idle keep-alive connections and bounds how
// long a request (body included) may take to arrive.
func TestHTTPServerTimeouts(t *testing.T) {
	srv := httpServer(http.NotFoundHandler(), io.Discard)
	if srv.IdleTimeout <= 0 || srv.ReadTimeout <= 0 || srv.ReadHeaderTimeout <= 0 {
		t.Fatalf("IdleTimeout %v, ReadTimeout %v, ReadHeaderTimeout %v: want each set",
			srv.IdleTimeout, srv.ReadTimeout, srv.ReadHeaderTimeout)
	}
}
