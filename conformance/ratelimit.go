package conformance

import (
	"net/http"
	"strconv"

	resilience "github.com/ylcnfrht/resilience/core"
)

var rateLimitCases = []Case{
	{
		Name: "rate-limit-per-key",
		Explanation: "The rate limit is per key: once client x has spent its quota it gets 429 RATE_LIMITED, while client y, " +
			"keyed apart by a header read through the request view, still gets its full quota.",
		run: caseRateLimitPerKey,
	},
	{
		Name: "rate-limit-headers",
		Explanation: "Admitted responses carry RateLimit-Limit, RateLimit-Remaining (counting down) and RateLimit-Reset; " +
			"a 429 carries the same fields with Remaining 0, plus Retry-After in whole seconds (at least 1), and the JSON body.",
		run: caseRateLimitHeaders,
	},
	{
		Name: "rate-limit-429-vs-503",
		Explanation: "The rate limit runs before the concurrency limiter: a client over its quota gets 429 (its quota ran out) " +
			"even when the server is full, while a client within its quota gets 503 when the server is full (capacity ran out).",
		run: caseRateLimit429vs503,
	},
}

func client(id string) map[string]string { return map[string]string{clientHeader: id} }

func caseRateLimitPerKey(t *caseT, e *env) {
	s := e.start(inboundOptions(long, nil, perClientRateLimit(2)), okHandler)
	for i := 0; i < 2; i++ {
		expectOK(t, "client x within quota", s.do(req{path: "/ok", header: client("x")}), "ok")
	}
	r := s.do(req{path: "/ok", header: client("x")})
	expectRejection(t, "client x over quota", r, http.StatusTooManyRequests, "RATE_LIMITED", "")
	for i := 0; i < 2; i++ {
		expectOK(t, "client y (own quota, unaffected by x)", s.do(req{path: "/ok", header: client("y")}), "ok")
	}
	r = s.do(req{path: "/ok", header: client("y")})
	expectRejection(t, "client y over quota", r, http.StatusTooManyRequests, "RATE_LIMITED", "")
}

func caseRateLimitHeaders(t *caseT, e *env) {
	s := e.start(inboundOptions(long, nil, perClientRateLimit(2)), okHandler)
	for i, remaining := range []int{1, 0} {
		r := s.do(req{path: "/ok", header: client("x")})
		expectOK(t, "admitted request "+strconv.Itoa(i+1), r, "ok")
		if r.err == nil {
			expectRateLimitHeaders(t, "admitted request "+strconv.Itoa(i+1), r.header, 2, remaining)
		}
	}
	r := s.do(req{path: "/ok", header: client("x")})
	expectRejection(t, "request over quota", r, http.StatusTooManyRequests, "RATE_LIMITED", "")
	if r.err != nil {
		return
	}
	expectRateLimitHeaders(t, "429", r.header, 2, 0)
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Errorf("429 Retry-After %q, want whole seconds >= 1", r.header.Get("Retry-After"))
	}
}

func expectRateLimitHeaders(t *caseT, what string, h http.Header, limit, remaining int) {
	t.Helper()
	if got := h.Get("RateLimit-Limit"); got != strconv.Itoa(limit) {
		t.Errorf("%s: RateLimit-Limit %q, want %d", what, got, limit)
	}
	if got := h.Get("RateLimit-Remaining"); got != strconv.Itoa(remaining) {
		t.Errorf("%s: RateLimit-Remaining %q, want %d", what, got, remaining)
	}
	if n, err := strconv.Atoi(h.Get("RateLimit-Reset")); err != nil || n < 0 {
		t.Errorf("%s: RateLimit-Reset %q, want whole seconds >= 0", what, h.Get("RateLimit-Reset"))
	}
}

func caseRateLimit429vs503(t *caseT, e *env) {
	h := e.holder(false)
	s := e.start(inboundOptions(long, &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}, perClientRateLimit(1)), h)
	a := s.send(req{path: "/held?id=a", header: client("x")})
	h.waitEntered("a")
	// The server is full. x has spent its quota: 429, not 503.
	r := s.do(req{path: "/held?id=b", header: client("x")})
	expectRejection(t, "client x over quota while the server is full", r, http.StatusTooManyRequests, "RATE_LIMITED", "")
	// y is within its quota: the server's capacity is what ran out.
	r = s.do(req{path: "/held?id=c", header: client("y")})
	expectRejection(t, "client y within quota while the server is full", r, http.StatusServiceUnavailable, "BULKHEAD_FULL", "full")
	h.release("a")
	expectOK(t, "request a", s.await("request a", a), "done a")
	h.notEntered("rejected requests must never run")
	s.waitIdle("after the rejections")
}
