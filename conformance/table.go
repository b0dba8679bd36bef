package conformance

import (
	"context"
	"errors"
	"net/http"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// Cases for the rows of the inbound behaviour table (docs/DESIGN.md). The
// configurations are scaled down (a permit limit of 1 or 2) so that a case
// can fill the limiter with a handful of held requests.

// long is a timeout or queue timeout that must not fire during a case.
const long = time.Minute

var tableCases = []Case{
	{
		Name: "admit-below-limit",
		Explanation: "With fewer requests in flight than PermitLimit, a request runs at once: " +
			"two held requests run side by side under PermitLimit 2, none is queued, and each is answered 200 by the handler.",
		run: caseAdmitBelowLimit,
	},
	{
		Name: "queue-waits-for-slot",
		Explanation: "With every permit in use and room in the queue, a request waits for a slot (not rejected, not run): " +
			"it shows as queued, does not enter the handler, and runs as soon as the running request finishes.",
		run: caseQueueWaitsForSlot,
	},
	{
		Name: "queue-full-rejects-at-once",
		Explanation: "With every permit in use and the queue full, a request is answered at once (while the others are still held) " +
			`with 503, Content-Type application/json and {"statusCode":503,"error":"Service Unavailable","code":"BULKHEAD_FULL","reason":"full"}; the queued request keeps its place.`,
		run: caseQueueFull,
	},
	{
		Name: "queue-timeout",
		Explanation: "A request that waited QueueTimeout without a slot gets 503 BULKHEAD_FULL with reason queue-timeout, " +
			"while the request holding the slot is still running, and leaves the queue.",
		run: caseQueueTimeout,
	},
	{
		Name: "timeout-504",
		Explanation: "A handler that runs past Timeout gets its request context cancelled (deadline exceeded) and the client gets " +
			`504 with the JSON body {"statusCode":504,"error":"Gateway Timeout","code":"TIMEOUT"}; the permit is returned.`,
		run: caseTimeout504,
	},
	{
		Name: "health-before-middleware",
		Explanation: "A health route registered before the middleware is never shed: it answers 200 while every permit is in use, " +
			"the queue is full and the client's rate limit is spent.",
		run: caseHealth,
	},
}

func caseAdmitBelowLimit(t *caseT, e *env) {
	h := e.holder(false)
	s := e.start(limited(long, resilience.ConcurrencyLimiterOptions{PermitLimit: 2}), h)
	a := s.send(req{path: "/held?id=a"})
	h.waitEntered("a")
	b := s.send(req{path: "/held?id=b"})
	h.waitEntered("b")
	if st := s.Stats(); st.InFlight != 2 || st.Queued != 0 {
		t.Errorf("stats with two running: %+v, want InFlight 2, Queued 0", st)
	}
	h.release("a")
	h.release("b")
	expectOK(t, "request a", s.await("request a", a), "done a")
	expectOK(t, "request b", s.await("request b", b), "done b")
	if m := s.app.maxActive.Load(); m != 2 {
		t.Errorf("handlers running at once: %d, want 2", m)
	}
	s.waitIdle("after both finished")
}

func caseQueueWaitsForSlot(t *caseT, e *env) {
	h := e.holder(false)
	s := e.start(limited(long, resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: long}), h)
	a := s.send(req{path: "/held?id=a"})
	h.waitEntered("a")
	b := s.send(req{path: "/held?id=b"})
	s.waitQueued("b", 1)
	h.notEntered("request b must wait for the slot held by a")
	s.pending("request b", b)
	h.release("a")
	expectOK(t, "request a", s.await("request a", a), "done a")
	h.waitEntered("b")
	h.release("b")
	expectOK(t, "request b (queued, then run)", s.await("request b", b), "done b")
	s.waitIdle("after both finished")
}

func caseQueueFull(t *caseT, e *env) {
	h := e.holder(false)
	s := e.start(limited(long, resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: long}), h)
	a := s.send(req{path: "/held?id=a"})
	h.waitEntered("a")
	b := s.send(req{path: "/held?id=b"})
	s.waitQueued("b", 1)
	// a and b are held by the gate, so c can only be answered by the limiter.
	c := s.do(req{path: "/held?id=c"})
	expectRejection(t, "request c (queue full)", c, http.StatusServiceUnavailable, "BULKHEAD_FULL", "full")
	if st := s.Stats(); st.InFlight != 1 || st.Queued != 1 {
		t.Errorf("stats after the rejection: %+v, want InFlight 1, Queued 1 (the rejection must not disturb the others)", st)
	}
	h.release("a")
	h.waitEntered("b")
	h.release("b")
	expectOK(t, "request a", s.await("request a", a), "done a")
	expectOK(t, "request b", s.await("request b", b), "done b")
	h.notEntered("the rejected request must never run")
	s.waitIdle("after the rejection")
}

func caseQueueTimeout(t *caseT, e *env) {
	h := e.holder(false)
	const qt = 150 * time.Millisecond
	s := e.start(limited(long, resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: qt}), h)
	a := s.send(req{path: "/held?id=a"})
	h.waitEntered("a")
	b := s.await("request b", s.send(req{path: "/held?id=b"}))
	// a is still held: b can only have been answered by its queue timeout.
	expectRejection(t, "request b (waited QueueTimeout)", b, http.StatusServiceUnavailable, "BULKHEAD_FULL", "queue-timeout")
	if b.elapsed < qt {
		t.Errorf("request b answered after %v, before its queue timeout %v", b.elapsed, qt)
	}
	s.waitStats("request b leaving the queue", func(st inbound.Stats) bool { return st.Queued == 0 })
	s.pending("request a", a)
	h.release("a")
	expectOK(t, "request a", s.await("request a", a), "done a")
	h.notEntered("the timed-out request must never run")
	s.waitIdle("after the queue timeout")
}

func caseTimeout504(t *caseT, e *env) {
	h := e.holder(true)
	const timeout = 200 * time.Millisecond
	s := e.start(limited(timeout, resilience.ConcurrencyLimiterOptions{PermitLimit: 1}), h)
	r := s.do(req{path: "/held?id=a"})
	expectRejection(t, "request a (handler past its deadline)", r, http.StatusGatewayTimeout, "TIMEOUT", "")
	x := h.waitExited("a")
	if !errors.Is(x.err, context.DeadlineExceeded) {
		t.Errorf("the handler's context ended with %v, want context.DeadlineExceeded (cause %v)", x.err, x.cause)
	}
	if r.elapsed < timeout {
		t.Errorf("504 after %v, before the timeout %v", r.elapsed, timeout)
	}
	s.waitIdle("after the 504")
}

func caseHealth(t *caseT, e *env) {
	h := e.holder(false)
	opts := limited(long, resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: long})
	opts.RateLimit = perClientRateLimit(1)
	s := e.start(opts, h)
	a := s.send(req{path: "/held?id=a", header: map[string]string{clientHeader: "x"}})
	h.waitEntered("a")
	b := s.send(req{path: "/held?id=b", header: map[string]string{clientHeader: "y"}})
	s.waitQueued("b", 1)
	// Full limiter, full queue, and client x has spent its quota.
	shed := s.do(req{path: "/held?id=c", header: map[string]string{clientHeader: "z"}})
	expectRejection(t, "request c (limiter and queue full)", shed, http.StatusServiceUnavailable, "BULKHEAD_FULL", "full")
	for i := 0; i < 3; i++ {
		r := s.do(req{path: HealthPath, header: map[string]string{clientHeader: "x"}})
		expectOK(t, "health check while overloaded", r, "ok")
	}
	h.release("a")
	h.release("b")
	expectOK(t, "request a", s.await("request a", a), "done a")
	expectOK(t, "request b", s.await("request b", b), "done b")
	s.waitIdle("after the health checks")
}
