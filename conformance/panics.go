package conformance

import (
	"net/http"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

var panicCases = []Case{
	{
		Name: "panic-frees-permit",
		Explanation: "A handler that panics does not keep its permit: the client gets no 200 (a 500 or a closed connection, as the " +
			"framework does for panics), in flight returns to zero, and the next requests run under PermitLimit 1 with no queue.",
		run: casePanicFreesPermit,
	},
	{
		Name: "panic-abort-handler",
		Explanation: "A handler that panics with http.ErrAbortHandler aborts the connection: the client sees the connection " +
			"closed without a response, and the permit is returned.",
		Requires: CapAbortHandler,
		Pinned:   "the client gets no 200 (a 5xx or a closed connection), and the permit is returned.",
		run:      func(t *caseT, e *env) { casePanicAbort(t, e, false) },
		pinned:   func(t *caseT, e *env) { casePanicAbort(t, e, true) },
	},
	{
		Name: "panic-after-timeout",
		Explanation: "A handler that ignores its context and panics after its 504 was sent does not crash the server or keep " +
			"its permit: the 504 stands, and the next request runs.",
		run: casePanicAfterTimeout,
	},
}

func panicking(v any) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/panic", func(http.ResponseWriter, *http.Request) { panic(v) })
	mux.Handle("/ok", okHandler)
	return mux
}

func expectNotOK(t *caseT, what string, r result) {
	t.Helper()
	if r.err == nil && r.status < 500 {
		t.Errorf("%s: got %v, want a 5xx or a closed connection", what, r)
	}
}

func casePanicFreesPermit(t *caseT, e *env) {
	s := e.start(limited(long, resilience.ConcurrencyLimiterOptions{PermitLimit: 1}), panicking("conformance: deliberate panic"))
	for i := 0; i < 3; i++ {
		expectNotOK(t, "request to a panicking handler", s.do(req{path: "/panic"}))
		s.waitIdle("after the panic")
		expectOK(t, "request after the panic", s.do(req{path: "/ok"}), "ok")
	}
}

func casePanicAbort(t *caseT, e *env, pinned bool) {
	s := e.start(limited(long, resilience.ConcurrencyLimiterOptions{PermitLimit: 1}), panicking(http.ErrAbortHandler))
	for i := 0; i < 3; i++ {
		r := s.do(req{path: "/panic"})
		if pinned {
			expectNotOK(t, "request to a handler that aborts", r)
		} else if r.err == nil {
			t.Errorf("request to a handler that aborts: got %v, want the connection closed without a response", r)
		}
		s.waitIdle("after the abort")
		expectOK(t, "request after the abort", s.do(req{path: "/ok"}), "ok")
	}
}

func casePanicAfterTimeout(t *caseT, e *env) {
	const timeout = 200 * time.Millisecond
	g := e.gate()
	returned := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/late-panic", func(http.ResponseWriter, *http.Request) {
		defer close(returned)
		<-g.ch
		panic("conformance: deliberate panic after the deadline")
	})
	mux.Handle("/ok", okHandler)
	s := e.start(limited(timeout, resilience.ConcurrencyLimiterOptions{PermitLimit: 1}), mux)
	r := s.do(req{path: "/late-panic"})
	expectRejection(t, "request whose handler panics after the deadline", r, http.StatusGatewayTimeout, "TIMEOUT", "")
	g.open()
	receive(t, "the handler panicking", returned)
	s.waitIdle("after the late panic")
	expectOK(t, "request after the late panic", s.do(req{path: "/ok"}), "ok")
}
