package conformance

import (
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"net/http"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Cases for fair sharing between flows of one priority. As in the
// priority cases, request "run" holds the only permit, the others queue in
// a fixed order (each seen queued before the next is sent), and the
// permit is then handed on one request at a time, so the order requests
// enter the handler is the order the limiter granted them. Every request
// names its flow in flowHeader, read through the request view.

var fairnessCases = []Case{
	{
		Name: "fair-order",
		Explanation: "With a Flow function, a freed slot goes across the flows of a priority in turn, FIFO within a flow: " +
			"a noisy flow that queued n1, n2, n3 before two quiet flows queued q1 and q2 does not make them wait behind its backlog. " +
			"They must run n1, q1, q2, n2, n3 (FIFO would run n1, n2, n3, q1, q2). The Flow function reads a header through the request view.",
		run: caseFairOrder,
	},
	{
		Name: "fair-shedding",
		Explanation: "With a Flow function and a full queue, a newcomer of a flow with fewer waiters evicts the newest waiter of the flow " +
			"with the most (503 BULKHEAD_FULL reason dropped) and queues; a newcomer of the flow with the most is rejected (reason full).",
		run: caseFairShedding,
	},
}

// flowHeader names a request's flow for the suite's Flow function.
const flowHeader = "X-Conformance-Flow"

// fairSetup holds request "run" of flow "noisy" in the handler with a
// limiter of one permit and queueLimit places, flows keyed by flowHeader.
func fairSetup(e *env, queueLimit int) (*server, *holder, <-chan result) {
	e.t.Helper()
	h := e.holder(true)
	s := e.start(limited(long, resilience.ConcurrencyLimiterOptions{
		PermitLimit:  1,
		QueueLimit:   queueLimit,
		QueueTimeout: long,
		Flow:         by.Header(flowHeader),
	}), h)
	run := s.send(req{path: "/held?id=run", header: flowOf("noisy")})
	h.waitEntered("run")
	return s, h, run
}

func flowOf(f string) map[string]string { return map[string]string{flowHeader: f} }

// enqueueFlow sends a request of flow f and waits until the queue has
// grown to n.
func enqueueFlow(s *server, id, f string, n int) <-chan result {
	s.t.Helper()
	ch := s.send(req{path: "/held?id=" + id, header: flowOf(f)})
	s.waitQueued(id, n)
	return ch
}

func caseFairOrder(t *caseT, e *env) {
	s, h, run := fairSetup(e, 8)
	q := map[string]<-chan result{}
	q["n1"] = enqueueFlow(s, "n1", "noisy", 1)
	q["n2"] = enqueueFlow(s, "n2", "noisy", 2)
	q["n3"] = enqueueFlow(s, "n3", "noisy", 3)
	q["q1"] = enqueueFlow(s, "q1", "quiet-a", 4)
	q["q2"] = enqueueFlow(s, "q2", "quiet-b", 5)
	// n1's flow has waited longest and holds no permit the limiter gave
	// it (run took a free one): it goes first; from then on the noisy flow
	// has had its turn, and the quiet flows have theirs before its next.
	drain(t, s, h, run, []string{"n1", "q1", "q2", "n2", "n3"}, q)
}

func caseFairShedding(t *caseT, e *env) {
	s, h, run := fairSetup(e, 3)
	q := map[string]<-chan result{}
	q["n1"] = enqueueFlow(s, "n1", "noisy", 1)
	n2 := enqueueFlow(s, "n2", "noisy", 2)
	n3 := enqueueFlow(s, "n3", "noisy", 3)
	// The noisy flow has every place; another of its requests is the one
	// shed.
	r := s.do(req{path: "/held?id=n4", header: flowOf("noisy")})
	expectRejection(t, "newcomer n4 (its flow has the most queued)", r, http.StatusServiceUnavailable, "BULKHEAD_FULL", "full")
	// A quiet newcomer takes the place of the noisy flow's newest waiter.
	q["q1"] = s.send(req{path: "/held?id=q1", header: flowOf("quiet-a")})
	expectRejection(t, "waiter n3 (evicted by q1)", s.await("request n3", n3), http.StatusServiceUnavailable, "BULKHEAD_FULL", "dropped")
	s.waitQueued("q1", 3)
	q["q2"] = s.send(req{path: "/held?id=q2", header: flowOf("quiet-b")})
	expectRejection(t, "waiter n2 (evicted by q2)", s.await("request n2", n2), http.StatusServiceUnavailable, "BULKHEAD_FULL", "dropped")
	s.waitQueued("q2", 3)
	drain(t, s, h, run, []string{"n1", "q1", "q2"}, q)
}
