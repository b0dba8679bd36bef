package resilienceconnect_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// timeoutHeader sets a caller deadline of d on h in p's protocol, the
// way a client with a deadline would, but without a deadline on the
// client's side: a DeadlineExceeded then can only come from the server.
func timeoutHeader(p protocol, h http.Header, ms string) {
	if p.name == "connect" {
		h.Set("Connect-Timeout-Ms", ms)
		return
	}
	h.Set("Grpc-Timeout", ms+"m")
}

// TestDeadlineAnsweredWhileHandlerRuns: a handler that ignores its context
// past the inbound timeout gets its caller answered DeadlineExceeded on
// time (unary), or its stream ended with DeadlineExceeded after the
// messages already sent (server stream, bidi), with the same TIMEOUT
// ErrorInfo detail, while it still runs; it keeps its permit and counts as
// late until it returns.
func TestDeadlineAnsweredWhileHandlerRuns(t *testing.T) {
	opts := inbound.Options{Timeout: 200 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}
	held := func(t *testing.T, ts *testServer) {
		t.Helper()
		if s := ts.mw.Stats(); s.InFlight != 1 || s.Late != 1 {
			t.Errorf("after the answer, with the handler still running: %+v, want InFlight 1, Late 1", s)
		}
		// The inbound middleware underneath (what metrics exporters
		// observe) counts it too.
		if s := ts.mw.Inbound().Stats(); s.Late != 1 || s.LateTotal != 1 {
			t.Errorf("Inbound().Stats() with the late handler running: %+v, want Late 1, LateTotal 1", s)
		}
		ts.svc.open()
		if err := ts.svc.waitExited(t); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the handler's context ended with %v, want DeadlineExceeded", err)
		}
		waitFor(t, "the late handler's permit back", func() bool {
			s, is := ts.mw.Stats(), ts.mw.Inbound().Stats()
			return s.InFlight == 0 && s.Late == 0 && is.Late == 0
		})
		if s := ts.mw.Stats(); s.LateTotal != 1 {
			t.Errorf("LateTotal %d, want 1", s.LateTotal)
		}
		// The caller got DeadlineExceeded: the request counts as timed
		// out, not admitted, as the HTTP adapters count their 504s.
		if c := ts.mw.Inbound().Stats().RequestCounts; c.TimedOut != 1 || c.Admitted != 0 {
			t.Errorf("request counts %+v, want TimedOut 1 and Admitted 0", c)
		}
	}
	for _, p := range protocols {
		t.Run("unary/"+p.name, func(t *testing.T) {
			ts := startServer(t, opts)
			start := time.Now()
			_, err := ts.say(p).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String(msgHold)))
			expectCode(t, "unary past its deadline", err, connect.CodeDeadlineExceeded, inbound.CodeTimeout, "")
			if el := time.Since(start); el < opts.Timeout {
				t.Errorf("answered after %v, before the timeout %v", el, opts.Timeout)
			}
			held(t, ts)
		})
		t.Run("server-stream/"+p.name, func(t *testing.T) {
			ts := startServer(t, opts)
			st, err := ts.count(p).CallServerStream(t.Context(), connect.NewRequest(wrapperspb.String(msgHold)))
			if err != nil {
				t.Fatal(err)
			}
			if !st.Receive() || st.Msg().GetValue() != "1" {
				t.Fatalf("first message: %v", st.Err())
			}
			if st.Receive() {
				t.Fatalf("a message after the deadline: %v", st.Msg())
			}
			expectCode(t, "stream past its deadline", st.Err(), connect.CodeDeadlineExceeded, inbound.CodeTimeout, "")
			_ = st.Close()
			held(t, ts)
		})
		t.Run("bidi/"+p.name, func(t *testing.T) {
			ts := startServer(t, opts)
			bidi := ts.chat(p).CallBidiStream(t.Context())
			if err := bidi.Send(wrapperspb.String(msgHold)); err != nil {
				t.Fatal(err)
			}
			if r, err := bidi.Receive(); err != nil || r.GetValue() != "echo hold" {
				t.Fatalf("echo: %v, %v", r, err)
			}
			_, err := bidi.Receive()
			expectCode(t, "bidi past its deadline", err, connect.CodeDeadlineExceeded, inbound.CodeTimeout, "")
			_ = bidi.CloseRequest()
			_ = bidi.CloseResponse()
			held(t, ts)
		})
	}
}

// TestCallerDeadlineBeforeInboundTimeout: the caller's deadline
// (Connect-Timeout-Ms, grpc-timeout) ends the handler's context and is
// answered by the server when it comes before the inbound timeout.
func TestCallerDeadlineBeforeInboundTimeout(t *testing.T) {
	opts := inbound.Options{Timeout: time.Minute, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			ts := startServer(t, opts)
			req := connect.NewRequest(wrapperspb.String(msgHold))
			timeoutHeader(p, req.Header(), "200")
			start := time.Now()
			_, err := ts.say(p).CallUnary(t.Context(), req)
			expectCode(t, "caller deadline", err, connect.CodeDeadlineExceeded, inbound.CodeTimeout, "")
			if el := time.Since(start); el < 200*time.Millisecond || el > 30*time.Second {
				t.Errorf("answered after %v, want the caller's 200ms, not the inbound minute", el)
			}
			ts.svc.open()
			if err := ts.svc.waitExited(t); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("the handler's context ended with %v, want DeadlineExceeded", err)
			}
		})
	}
}

// TestQueueWaitBoundedByCallerDeadline: a queued call waits no longer than
// the caller's deadline (here shorter than QueueTimeout), is answered
// DeadlineExceeded and leaves the queue without running.
func TestQueueWaitBoundedByCallerDeadline(t *testing.T) {
	opts := inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Minute}}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			ts := startServer(t, opts)
			holder := ts.callSay(t.Context(), p, msgHold)
			ts.svc.waitEntered(t, sayProcedure)
			req := connect.NewRequest(wrapperspb.String("queued"))
			timeoutHeader(p, req.Header(), "200")
			start := time.Now()
			_, err := ts.say(p).CallUnary(t.Context(), req)
			expectCode(t, "queued past the caller's deadline", err, connect.CodeDeadlineExceeded, inbound.CodeTimeout, "")
			if el := time.Since(start); el < 200*time.Millisecond || el > 30*time.Second {
				t.Errorf("answered after %v, want the caller's 200ms, not the queue's minute", el)
			}
			if s := ts.mw.Stats(); s.Queued != 0 || s.InFlight != 1 {
				t.Errorf("after the queued call left: %+v, want Queued 0, InFlight 1", s)
			}
			ts.svc.notEntered(t)
			ts.svc.open()
			if err := await(t, "holder", holder); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestExpiredDeadlineRejectedAtOnce: a call whose deadline has already
// passed (a zero timeout) is answered DeadlineExceeded before the limiter:
// it never queues (the priority function, called for every call that must
// queue, never runs for it) and never runs.
func TestExpiredDeadlineRejectedAtOnce(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			var queued atomic.Int64
			ts := startServer(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{
				PermitLimit: 1, QueueLimit: 4, QueueTimeout: time.Minute,
				Priority: func(context.Context) int { queued.Add(1); return 0 },
			}})
			holder := ts.callSay(t.Context(), p, msgHold)
			ts.svc.waitEntered(t, sayProcedure)
			req := connect.NewRequest(wrapperspb.String("late"))
			if p.name == "connect" {
				req.Header().Set("Connect-Timeout-Ms", "0")
			} else {
				req.Header().Set("Grpc-Timeout", "0n")
			}
			_, err := ts.say(p).CallUnary(t.Context(), req)
			expectCode(t, "expired deadline", err, connect.CodeDeadlineExceeded, inbound.CodeTimeout, "")
			if n := queued.Load(); n != 0 {
				t.Errorf("the expired call was queued (%d priority calls)", n)
			}
			ts.svc.notEntered(t)
			ts.svc.open()
			if err := await(t, "holder", holder); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestMalformedTimeoutRefusedAsConnectDoes: a malformed deadline header
// gets the code connect's own handler answers (InvalidArgument), before
// the limiter (here full); one connect ignores is ignored.
func TestMalformedTimeoutRefusedAsConnectDoes(t *testing.T) {
	cases := []struct {
		protocol string
		value    string
	}{
		{"connect", "abc"}, {"connect", "12345678901"}, {"connect", "-1"}, {"connect", "1.5"},
		{"grpc", "1x"}, {"grpc", "m"}, {"grpc", "123456789m"}, {"grpc", "-1m"}, {"grpc", "99999999H"},
		{"grpcweb", "5"}, {"grpcweb", "1 S"},
	}
	bareSvc := newService()
	bare := httptest.NewUnstartedServer(bareSvc.mux())
	bare.Config.Protocols = new(http.Protocols)
	bare.Config.Protocols.SetHTTP1(true)
	bare.Config.Protocols.SetUnencryptedHTTP2(true)
	bare.Start()
	defer bare.Close()
	ts := startServer(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	holder := ts.callSay(t.Context(), protocols[0], msgHold)
	ts.svc.waitEntered(t, sayProcedure)
	for _, tc := range cases {
		var p protocol
		for _, q := range protocols {
			if q.name == tc.protocol {
				p = q
			}
		}
		call := func(url string) error {
			req := connect.NewRequest(wrapperspb.String("x"))
			if p.name == "connect" {
				req.Header().Set("Connect-Timeout-Ms", tc.value)
			} else {
				req.Header().Set("Grpc-Timeout", tc.value)
			}
			_, err := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](ts.client, url+sayProcedure, p.opts...).CallUnary(t.Context(), req)
			return err
		}
		want := connect.CodeOf(call(bare.URL))
		if want == connect.CodeUnknown { // connect ignores the value: the call ran
			want = connect.CodeUnavailable // through the full middleware instead
		}
		if got := connect.CodeOf(call(ts.url)); got != want {
			t.Errorf("%s %q: code %v through the middleware, connect alone answers %v", tc.protocol, tc.value, got, want)
		}
	}
	ts.svc.open()
	if err := await(t, "holder", holder); err != nil {
		t.Error(err)
	}
	bareSvc.open()
}

// TestFloodingStreamEndsAtDeadline: a stream handler that ignores its
// context and sends until a send fails, to a client that reads nothing,
// has its sends refused from the deadline on, so it returns and its permit
// comes back.
func TestFloodingStreamEndsAtDeadline(t *testing.T) {
	opts := inbound.Options{Timeout: 300 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			ts := startServer(t, opts)
			client := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](ts.client, ts.url+floodProcedure, p.opts...)
			st, err := client.CallServerStream(t.Context(), connect.NewRequest(wrapperspb.String("go")))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ts.svc.waitEntered(t, floodProcedure)
			// The client reads nothing; the handler must still end.
			if err := ts.svc.waitExited(t); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("the flooding handler's context ended with %v, want DeadlineExceeded", err)
			}
			waitFor(t, "the permit back", func() bool { return ts.mw.Stats().InFlight == 0 })
		})
	}
}
