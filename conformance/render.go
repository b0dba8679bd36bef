package conformance

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

var renderCases = []Case{
	{
		Name: "render-every-rejection",
		Explanation: "Options.Render is called for every rejection and the client gets exactly what it returned: " +
			"the 429, the 503s with reasons full, dropped, queue-timeout and shutting-down (queued, and arriving, when the limiter is closed as Drain closes it), " +
			"and the 504 at the deadline (while the handler still runs) " +
			"each carry Render's status, its application/problem+json body and the extra header it chose.",
		run: caseRenderEveryRejection,
	},
}

// renderedHeader is the extra field the suite's Render adds.
const renderedHeader = "X-Conformance-Rendered"

// problemRender renders a rejection as problem+json with the bulkhead's
// reason and an extra header, the way a service with its own error format
// does.
func problemRender(err error, def inbound.Response) inbound.Response {
	reason := ""
	var b *resilience.ConcurrencyLimitRejectedError
	if errors.As(err, &b) {
		reason = string(b.Reason)
	}
	h := def.Header.Clone()
	h.Set("Content-Type", "application/problem+json")
	h.Set(renderedHeader, strconv.Itoa(def.Status))
	return inbound.Response{Status: def.Status, Header: h, Body: []byte(problemBody(def.Status, reason))}
}

func problemBody(status int, reason string) string {
	return fmt.Sprintf(`{"type":"about:blank","status":%d,"reason":%q}`, status, reason)
}

// expectRendered checks that r is problemRender's response.
func expectRendered(t *caseT, what string, r result, status int, reason string) {
	t.Helper()
	if r.err != nil || r.status != status {
		t.Errorf("%s: want the rendered %d, got %v", what, status, r)
		return
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want Render's application/problem+json", what, ct)
	}
	if got := r.header.Get(renderedHeader); got != strconv.Itoa(status) {
		t.Errorf("%s: %s %q, want Render's %d", what, renderedHeader, got, status)
	}
	if want := problemBody(status, reason); string(r.body) != want {
		t.Errorf("%s: body %q, want Render's %q", what, truncate(string(r.body), 200), want)
	}
}

func caseRenderEveryRejection(t *caseT, e *env) {
	// 429, full and dropped, with a limiter that never times out.
	h := e.holder(false)
	opts := inbound.Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{
			PermitLimit: 1, QueueLimit: 1, QueueTimeout: long,
			Priority: priorityFromHeader, Overflow: resilience.OverflowDropLowestPriority,
		},
		RateLimit: perClientRateLimit(1),
		Render:    problemRender,
	}
	s := e.start(opts, h)
	with := func(c string, p int) map[string]string {
		return map[string]string{clientHeader: c, priorityHeader: strconv.Itoa(p)}
	}
	run := s.send(req{path: "/held?id=run", header: with("r", 9)})
	h.waitEntered("run")
	q := s.send(req{path: "/held?id=q", header: with("q", 5)})
	s.waitQueued("q", 1)
	expectRendered(t, "request f (queue full)", s.do(req{path: "/held?id=f", header: with("f", 5)}), http.StatusServiceUnavailable, string(resilience.ReasonFull))
	d := s.send(req{path: "/held?id=d", header: with("d", 0)})
	expectRendered(t, "request q (evicted by d)", s.await("request q", q), http.StatusServiceUnavailable, string(resilience.ReasonDropped))
	rl := s.do(req{path: "/held?id=r2", header: with("r", 0)})
	expectRendered(t, "request r2 (rate limited)", rl, http.StatusTooManyRequests, "")
	if rl.header.Get("Retry-After") == "" {
		t.Errorf("request r2: the default Retry-After, kept by Render, is missing")
	}
	h.release("run")
	expectOK(t, "request run", s.await("request run", run), "done run")
	h.waitEntered("d")
	h.release("d")
	expectOK(t, "request d", s.await("request d", d), "done d")
	s.waitIdle("after the rate-limit and bulkhead rejections")

	// queue-timeout and the 504, under a handler that ignores its context.
	const timeout, qt = 200 * time.Millisecond, 100 * time.Millisecond
	h2 := e.holder(false)
	opts2 := limited(timeout, resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: qt})
	opts2.Render = problemRender
	s2 := e.start(opts2, h2)
	a := s2.send(req{path: "/held?id=a", fresh: true})
	h2.waitEntered("a")
	// a holds the permit past its 504 (it ignores its context), so b can
	// only be answered by its queue timeout.
	b := s2.do(req{path: "/held?id=b", fresh: true})
	expectRendered(t, "request b (waited QueueTimeout)", b, http.StatusServiceUnavailable, string(resilience.ReasonQueueTimeout))
	// Without CapOnTime504 the 504 comes when the handler returns, once
	// its deadline has passed.
	_, late := e.h.Missing[CapOnTime504]
	if late {
		lingerPastDeadline(timeout)
		h2.release("a")
	}
	expectRendered(t, "request a (504 at the deadline)", s2.await("request a", a), http.StatusGatewayTimeout, "")
	h2.notEntered("the timed-out request must never run")
	if !late {
		h2.release("a")
	}
	s2.waitIdle("after the 504")

	// shutting-down: the limiter is closed, as Middleware.Drain closes it,
	// while a request is queued; that request and a later arrival are
	// rendered. A custom pipeline gives the case the limiter to close.
	s3, h3, run3, q3 := startShutDown(t, e, inbound.Options{Render: problemRender})
	expectRendered(t, "request q (queued when the limiter closed)", s3.await("request q", q3), http.StatusServiceUnavailable, string(resilience.ReasonShuttingDown))
	expectRendered(t, "request n3 (arrived after it closed)", s3.do(req{path: "/held?id=n3"}), http.StatusServiceUnavailable, string(resilience.ReasonShuttingDown))
	h3.release("run")
	expectOK(t, "request run", s3.await("request run", run3), "done run")
	s3.waitIdle("after the shutting-down rejections")
}
