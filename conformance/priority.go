package conformance

import (
	"net/http"
	"strconv"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Cases for the priority queue and the overflow policies. One permit is
// held by request "run"; the others queue in a fixed arrival order (each is
// seen queued before the next is sent), then the permit is handed on one
// request at a time so the order they enter the handler is the order the
// limiter granted them.

var priorityCases = []Case{
	{
		Name: "priority-order",
		Explanation: "A freed slot goes to the best waiter: lower Priority first, and arrival order within a priority. " +
			"Queued in the order p5, p1a, p3, p1b, they must run p1a, p1b, p3, p5. The Priority function reads a header through the request view.",
		run: casePriorityOrder,
	},
	{
		Name: "overflow-reject-new",
		Explanation: "With the reject-new policy (the default) and a full queue, the newcomer gets 503 reason full at once, " +
			"whatever its priority, and the queued requests keep their places and run.",
		run: caseOverflowRejectNew,
	},
	{
		Name: "overflow-drop-oldest",
		Explanation: "With the drop-oldest policy and a full queue, the longest waiter is evicted with 503 BULKHEAD_FULL reason dropped " +
			"and the newcomer takes a place in the queue and later runs.",
		run: caseOverflowDropOldest,
	},
	{
		Name: "overflow-drop-lowest-priority",
		Explanation: "With the drop-lowest-priority policy and a full queue, a newcomer that outranks the lowest-priority waiter evicts it " +
			"(503 reason dropped) and queues; a newcomer that does not outrank anyone is rejected (503 reason full).",
		run: caseOverflowDropLowest,
	},
	{
		Name: "running-never-interrupted",
		Explanation: "Overflow policies only ever evict queued requests: a running low-priority request is not cancelled to make room " +
			"for a flood of high-priority ones, and completes with 200.",
		run: caseRunningNeverInterrupted,
	},
}

// queueSetup holds request "run" in the handler with a limiter of one
// permit and queueLimit places, under the given overflow policy.
func queueSetup(e *env, queueLimit int, overflow resilience.OverflowPolicy) (*server, *holder, <-chan result) {
	e.t.Helper()
	h := e.holder(true)
	s := e.start(limited(long, resilience.ConcurrencyLimiterOptions{
		PermitLimit:  1,
		QueueLimit:   queueLimit,
		QueueTimeout: long,
		Priority:     priorityFromHeader,
		Overflow:     overflow,
	}), h)
	run := s.send(req{path: "/held?id=run", header: prio(9)})
	h.waitEntered("run")
	return s, h, run
}

func prio(p int) map[string]string { return map[string]string{priorityHeader: strconv.Itoa(p)} }

// enqueue sends a request and waits until the queue has grown to n.
func enqueue(s *server, id string, p, n int) <-chan result {
	s.t.Helper()
	ch := s.send(req{path: "/held?id=" + id, header: prio(p)})
	s.waitQueued(id, n)
	return ch
}

// drain releases the running request and then each request in want in
// turn, checking that they enter the handler in exactly that order.
func drain(t *caseT, s *server, h *holder, run <-chan result, want []string, queued map[string]<-chan result) {
	t.Helper()
	h.release("run")
	expectOK(t, "request run", s.await("request run", run), "done run")
	for _, id := range want {
		got := receive(t, "next request entering the handler", h.entered)
		if got != id {
			t.Fatalf("request %q ran next, want %q (grant order %v)", got, id, want)
		}
		h.release(id)
		expectOK(t, "request "+id, s.await("request "+id, queued[id]), "done "+id)
	}
	s.waitIdle("after the queue drained")
}

func casePriorityOrder(t *caseT, e *env) {
	s, h, run := queueSetup(e, 4, resilience.OverflowRejectNew)
	q := map[string]<-chan result{}
	q["p5"] = enqueue(s, "p5", 5, 1)
	q["p1a"] = enqueue(s, "p1a", 1, 2)
	q["p3"] = enqueue(s, "p3", 3, 3)
	q["p1b"] = enqueue(s, "p1b", 1, 4)
	drain(t, s, h, run, []string{"p1a", "p1b", "p3", "p5"}, q)
}

func caseOverflowRejectNew(t *caseT, e *env) {
	s, h, run := queueSetup(e, 2, resilience.OverflowRejectNew)
	q := map[string]<-chan result{}
	q["a"] = enqueue(s, "a", 5, 1)
	q["b"] = enqueue(s, "b", 5, 2)
	// Even a higher-priority newcomer is rejected under reject-new.
	r := s.do(req{path: "/held?id=c", header: prio(0)})
	expectRejection(t, "newcomer c (queue full, reject-new)", r, http.StatusServiceUnavailable, "BULKHEAD_FULL", "full")
	s.pending("queued a", q["a"])
	s.pending("queued b", q["b"])
	drain(t, s, h, run, []string{"a", "b"}, q)
}

func caseOverflowDropOldest(t *caseT, e *env) {
	s, h, run := queueSetup(e, 2, resilience.OverflowDropOldest)
	q := map[string]<-chan result{}
	a := enqueue(s, "a", 0, 1)
	q["b"] = enqueue(s, "b", 0, 2)
	q["c"] = s.send(req{path: "/held?id=c", header: prio(0)})
	expectRejection(t, "oldest waiter a (evicted by c)", s.await("request a", a), http.StatusServiceUnavailable, "BULKHEAD_FULL", "dropped")
	s.waitQueued("c", 2) // in a's place
	drain(t, s, h, run, []string{"b", "c"}, q)
}

func caseOverflowDropLowest(t *caseT, e *env) {
	s, h, run := queueSetup(e, 2, resilience.OverflowDropLowestPriority)
	q := map[string]<-chan result{}
	q["mid"] = enqueue(s, "mid", 3, 1)
	low := enqueue(s, "low", 5, 2)
	// A newcomer that does not outrank the lowest waiter is rejected.
	r := s.do(req{path: "/held?id=lower", header: prio(7)})
	expectRejection(t, "newcomer lower (priority 7, outranks nobody)", r, http.StatusServiceUnavailable, "BULKHEAD_FULL", "full")
	// One that does evicts the lowest waiter.
	q["high"] = s.send(req{path: "/held?id=high", header: prio(1)})
	expectRejection(t, "waiter low (evicted by high)", s.await("request low", low), http.StatusServiceUnavailable, "BULKHEAD_FULL", "dropped")
	s.waitQueued("high", 2) // in low's place
	drain(t, s, h, run, []string{"high", "mid"}, q)
}

func caseRunningNeverInterrupted(t *caseT, e *env) {
	// run has priority 9, the lowest; everything after outranks it.
	s, h, run := queueSetup(e, 1, resilience.OverflowDropLowestPriority)
	q := map[string]<-chan result{}
	first := enqueue(s, "w0", 5, 1)
	for i := 1; i <= 3; i++ {
		id := "w" + strconv.Itoa(i)
		ch := s.send(req{path: "/held?id=" + id, header: prio(5 - i)})
		expectRejection(t, "waiter evicted by "+id, s.await("evicted waiter", first), http.StatusServiceUnavailable, "BULKHEAD_FULL", "dropped")
		s.waitQueued(id, 1)
		first = ch
	}
	q["w3"] = first
	s.pending("running request", run)
	select {
	case x := <-h.exited:
		t.Fatalf("request %q left the handler (context %v) while evictions happened; running requests must not be interrupted", x.id, x.err)
	default:
	}
	drain(t, s, h, run, []string{"w3"}, q)
}
