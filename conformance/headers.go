package conformance

import (
	"net/http"

	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

var headerCases = []Case{
	{
		Name: "retry-after-503s",
		Explanation: "Every capacity 503 carries the same Retry-After: 1 by default (inbound.DefaultRetryAfter) on full " +
			"and queue-timeout; Options.RetryAfter sets the value (3 s gives 3) and a negative value sends none.",
		run: caseRetryAfter503s,
	},
	{
		Name: "retry-after-shutting-down",
		Explanation: "A 503 shutting-down (queued when the limiter closed, as Drain closes it, and arriving after) carries " +
			"Retry-After: 1 like the other capacity 503s: the service is still there, on another instance.",
		Requires: CapShutdownRetryAfter,
		Pinned:   "the 503 shutting-down carries no Retry-After (the adapter tells clients not to retry here instead)",
		run:      func(t *caseT, e *env) { caseShutdownRetryAfter(t, e, "1") },
		pinned:   func(t *caseT, e *env) { caseShutdownRetryAfter(t, e, "") },
	},
	{
		Name: "rate-limit-headers-on-503",
		Explanation: "On a rate-limited route the 503 of a full server carries the rate limit's fields for the request's " +
			"decision (RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset) beside its Retry-After, as admitted responses do.",
		run: caseRateLimitHeadersOn503,
	},
}

// expectRetryAfter checks r's Retry-After field: want "" means none.
func expectRetryAfter(t *caseT, what string, r result, want string) {
	t.Helper()
	if r.err != nil {
		return // expectRejection reported it
	}
	if got := r.header.Values("Retry-After"); (want == "" && len(got) != 0) || (want != "" && (len(got) != 1 || got[0] != want)) {
		if want == "" {
			want = "none"
		}
		t.Errorf("%s: Retry-After %q, want %s", what, got, want)
	}
}

func caseRetryAfter503s(t *caseT, e *env) {
	for _, c := range []struct {
		retryAfter time.Duration
		want       string
	}{{0, "1"}, {3 * time.Second, "3"}, {-1, ""}} {
		what := func(s string) string { return s + " (Options.RetryAfter " + c.retryAfter.String() + ")" }
		h := e.holder(false)
		opts := limited(long, resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: 50 * time.Millisecond})
		opts.RetryAfter = c.retryAfter
		s := e.start(opts, h)
		a := s.send(req{path: "/held?id=a"})
		h.waitEntered("a")
		b := s.send(req{path: "/held?id=b"})
		s.waitQueued("b", 1)
		r := s.do(req{path: "/held?id=c"})
		expectRejection(t, what("request c (queue full)"), r, http.StatusServiceUnavailable, "BULKHEAD_FULL", string(resilience.ReasonFull))
		expectRetryAfter(t, what("request c (queue full)"), r, c.want)
		r = s.await("request b", b)
		expectRejection(t, what("request b (waited QueueTimeout)"), r, http.StatusServiceUnavailable, "BULKHEAD_FULL", string(resilience.ReasonQueueTimeout))
		expectRetryAfter(t, what("request b (waited QueueTimeout)"), r, c.want)
		h.release("a")
		expectOK(t, what("request a"), s.await("request a", a), "done a")
		h.notEntered("rejected requests must never run")
		s.waitIdle("after the capacity rejections")
	}
}

// caseShutdownRetryAfter closes the limiter as Middleware.Drain does, with
// a request queued, and checks that one's and a later arrival's 503.
func caseShutdownRetryAfter(t *caseT, e *env, want string) {
	s, h, run, q := startShutDown(t, e, inbound.Options{})
	for _, x := range []struct {
		what string
		r    result
	}{
		{"request q (queued when the limiter closed)", s.await("request q", q)},
		{"request n (arrived after it closed)", s.do(req{path: "/held?id=n"})},
	} {
		expectRejection(t, x.what, x.r, http.StatusServiceUnavailable, "BULKHEAD_FULL", string(resilience.ReasonShuttingDown))
		expectRetryAfter(t, x.what, x.r, want)
	}
	h.release("run")
	expectOK(t, "request run", s.await("request run", run), "done run")
	s.waitIdle("after the shutting-down rejections")
}

func caseRateLimitHeadersOn503(t *caseT, e *env) {
	h := e.holder(false)
	s := e.start(inboundOptions(long, &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}, perClientRateLimit(5)), h)
	a := s.send(req{path: "/held?id=a", header: client("x")})
	h.waitEntered("a")
	r := s.do(req{path: "/held?id=b", header: client("x")})
	expectRejection(t, "request b (server full, within quota)", r, http.StatusServiceUnavailable, "BULKHEAD_FULL", string(resilience.ReasonFull))
	if r.err == nil && r.status == http.StatusServiceUnavailable {
		expectRateLimitHeaders(t, "503 of request b", r.header, 5, 3)
		expectRetryAfter(t, "503 of request b", r, "1")
	}
	h.release("a")
	r = s.await("request a", a)
	expectOK(t, "request a", r, "done a")
	if r.err == nil {
		expectRateLimitHeaders(t, "request a", r.header, 5, 4)
	}
	h.notEntered("rejected requests must never run")
	s.waitIdle("after the rejection")
}
