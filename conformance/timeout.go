package conformance

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

var timeoutCases = []Case{
	{
		Name: "timeout-ignored-context",
		Explanation: "A handler that ignores its context still gets its client a complete 504 TIMEOUT on time (the handler is held " +
			"by a gate the case opens only after the 504 arrived). The handler keeps its permit until it really returns, " +
			"so the concurrency cap stays true: meanwhile a new request is rejected 503 full.",
		run: caseTimeoutIgnoredContext,
	},
	{
		Name: "timeout-late-writes-discarded",
		Explanation: "After the 504, the handler's late headers and writes are discarded without a data race: the client's 504 is " +
			"exactly the JSON body, and the server's later responses are not corrupted by them.",
		run: caseTimeoutLateWrites,
	},
	{
		Name: "timeout-nested-pipeline",
		Explanation: "A resilience pipeline executed inside the handler with the request's context observes the inbound deadline: " +
			"its callback's context ends with context.DeadlineExceeded and Execute returns, although the pipeline's own timeout is far away.",
		run: caseTimeoutNestedPipeline,
	},
}

func caseTimeoutIgnoredContext(t *caseT, e *env) {
	h := e.holder(false)
	const timeout = 200 * time.Millisecond
	s := e.start(limited(timeout, resilience.ConcurrencyLimiterOptions{PermitLimit: 1}), h)
	ch := s.send(req{path: "/held?id=a", fresh: true})
	h.waitEntered("a")
	r := s.await("request a", ch)
	expectRejection(t, "request a (handler ignores its context)", r, http.StatusGatewayTimeout, "TIMEOUT", "")
	if r.err == nil && (r.elapsed < timeout || r.elapsed > timeout+3*time.Second) {
		t.Errorf("504 after %v; want it at the %v deadline (within a 3 s margin)", r.elapsed, timeout)
	}
	// The handler is still held: its permit must still be counted.
	if st := s.Stats(); st.InFlight != 1 {
		t.Errorf("stats after the 504 with the handler still running: %+v, want InFlight 1", st)
	}
	b := s.do(req{path: "/held?id=b"})
	expectRejection(t, "request b while the timed-out handler still runs", b, http.StatusServiceUnavailable, "BULKHEAD_FULL", "full")
	h.release("a")
	h.waitExited("a")
	s.waitIdle("after the timed-out handler returned")
	h.release("c")
	expectOK(t, "request c after the permit came back", s.do(req{path: "/held?id=c"}), "done c")
}

func caseTimeoutLateWrites(t *caseT, e *env) {
	const timeout = 200 * time.Millisecond
	g := e.gate()
	wrote := make(chan error, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/late", func(w http.ResponseWriter, r *http.Request) {
		<-g.ch // ignores its context
		w.Header().Set("X-Late", "yes")
		w.WriteHeader(http.StatusTeapot)
		_, err := io.WriteString(w, "LATE BODY THAT MUST NOT REACH THE CLIENT\r\n\r\nHTTP/1.1 200 OK\r\n")
		if err == nil {
			err = http.NewResponseController(w).Flush()
		}
		wrote <- err
	})
	mux.Handle("/ok", okHandler)
	s := e.start(limited(timeout, resilience.ConcurrencyLimiterOptions{PermitLimit: 4}), mux)
	r := s.do(req{path: "/late"})
	expectRejection(t, "request to the late handler", r, http.StatusGatewayTimeout, "TIMEOUT", "")
	if r.err == nil && r.header.Get("X-Late") != "" {
		t.Errorf("504 carries the handler's late header X-Late")
	}
	g.open()
	err := receive(t, "the late handler's write", wrote)
	t.Logf("the late handler's write returned %v", err)
	s.waitIdle("after the late handler returned")
	// The late writes corrupt nothing: the server keeps answering. (The
	// 504 carried Connection: close, so these use new connections.)
	for i := 0; i < 3; i++ {
		expectOK(t, "request after the late writes", s.do(req{path: "/ok"}), "ok")
	}
}

func caseTimeoutNestedPipeline(t *caseT, e *env) {
	const timeout = 200 * time.Millisecond
	type outcome struct{ ctxErr, execErr error }
	done := make(chan outcome, 1)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := resilience.NewBuilder[int](resilience.WithName("nested")).AddTimeout(resilience.TimeoutOptions{Timeout: long}).Build()
		if err != nil {
			done <- outcome{execErr: err}
			return
		}
		var inner error
		_, execErr := p.Execute(r.Context(), func(ctx context.Context) (int, error) {
			<-ctx.Done()
			inner = ctx.Err()
			return 0, ctx.Err()
		})
		done <- outcome{ctxErr: inner, execErr: execErr}
	})
	s := e.start(limited(timeout, resilience.ConcurrencyLimiterOptions{PermitLimit: 1}), handler)
	r := s.do(req{path: "/nested"})
	expectRejection(t, "request running a nested pipeline", r, http.StatusGatewayTimeout, "TIMEOUT", "")
	o := receive(t, "the nested pipeline returning", done)
	if !errors.Is(o.ctxErr, context.DeadlineExceeded) {
		t.Errorf("nested callback's context ended with %v, want context.DeadlineExceeded", o.ctxErr)
	}
	if !errors.Is(o.execErr, context.DeadlineExceeded) {
		t.Errorf("nested Execute returned %v, want an error matching context.DeadlineExceeded", o.execErr)
	}
	var own *resilience.TimeoutRejectedError
	if errors.As(o.execErr, &own) && own.Timeout == long {
		t.Errorf("nested Execute returned its own timeout %v; the inbound deadline should have ended it", own)
	}
	s.waitIdle("after the nested pipeline stopped")
}
