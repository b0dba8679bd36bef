package resilienceconnect_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestCallsPassThrough: admitted unary, server-stream and bidi calls reach
// the handler and return whole, in every protocol, with and without a
// deadline (the timed path runs the handler on a goroutine of its own).
func TestCallsPassThrough(t *testing.T) {
	configs := map[string]inbound.Options{
		"untimed": {Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4}},
		"timed":   {Timeout: time.Minute, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4}},
	}
	for cname, opts := range configs {
		for _, p := range protocols {
			t.Run(cname+"/"+p.name, func(t *testing.T) {
				ts := startServer(t, opts)
				ctx := t.Context()
				res, err := ts.say(p).CallUnary(ctx, connect.NewRequest(wrapperspb.String("hi")))
				if err != nil || res.Msg.GetValue() != "hello hi" {
					t.Fatalf("unary: %v, %v", res, err)
				}
				st, err := ts.count(p).CallServerStream(ctx, connect.NewRequest(wrapperspb.String("go")))
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for st.Receive() {
					got = append(got, st.Msg().GetValue())
				}
				if err := st.Err(); err != nil || len(got) != 2 || got[0] != "1" || got[1] != "2" {
					t.Fatalf("server stream: %v, %v", got, err)
				}
				_ = st.Close()
				bidi := ts.chat(p).CallBidiStream(ctx)
				for _, m := range []string{"a", "b"} {
					if err := bidi.Send(wrapperspb.String(m)); err != nil {
						t.Fatal(err)
					}
					r, err := bidi.Receive()
					if err != nil || r.GetValue() != "echo "+m {
						t.Fatalf("bidi: %v, %v", r, err)
					}
				}
				_ = bidi.CloseRequest()
				if _, err := bidi.Receive(); err == nil {
					t.Fatal("bidi: a message after the end")
				}
				_ = bidi.CloseResponse()
				for _, want := range []string{sayProcedure, countProcedure, chatProcedure} {
					ts.svc.waitEntered(t, want)
				}
			})
		}
	}
}

// TestCapacityRejection: with the only permit held and no queue, unary,
// server-stream and bidi calls are refused with Unavailable, the reason
// in an ErrorInfo detail and the retry advice as Retry-After,
// grpc-retry-pushback-ms and RetryInfo, in every protocol; none runs.
func TestCapacityRejection(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			ts := startServer(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
			held := ts.callSay(t.Context(), p, msgHold)
			ts.svc.waitEntered(t, sayProcedure)

			_, err := ts.say(p).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x")))
			ce := expectCode(t, "unary", err, connect.CodeUnavailable, inbound.CodeBulkheadFull, "full")
			if got := ce.Meta().Get("Retry-After"); got != "1" {
				t.Errorf("Retry-After %q, want 1", got)
			}
			if got := ce.Meta().Get("Grpc-Retry-Pushback-Ms"); got != "1000" {
				t.Errorf("grpc-retry-pushback-ms %q, want 1000", got)
			}
			if d, ok := retryDelayOf(ce); !ok || d != resilienceconnect.CapacityRetryAfter {
				t.Errorf("RetryInfo delay %v (%v), want %v", d, ok, resilienceconnect.CapacityRetryAfter)
			}

			st, err := ts.count(p).CallServerStream(t.Context(), connect.NewRequest(wrapperspb.String("x")))
			if err == nil {
				for st.Receive() {
					t.Error("server stream: a message from a refused call")
				}
				err = st.Err()
				_ = st.Close()
			}
			expectCode(t, "server stream", err, connect.CodeUnavailable, inbound.CodeBulkheadFull, "full")

			bidi := ts.chat(p).CallBidiStream(t.Context())
			_ = bidi.Send(wrapperspb.String("x"))
			_, err = bidi.Receive()
			expectCode(t, "bidi stream", err, connect.CodeUnavailable, inbound.CodeBulkheadFull, "full")
			_ = bidi.CloseRequest()
			_ = bidi.CloseResponse()

			ts.svc.notEntered(t)
			ts.svc.open()
			if err := await(t, "held call", held); err != nil {
				t.Errorf("held call: %v", err)
			}
		})
	}
}

// TestStreamsHoldPermits: a server stream and a bidi stream hold their
// permit for as long as their handler runs, so a unary call is refused
// meanwhile; the permit comes back when the stream's handler returns.
func TestStreamsHoldPermits(t *testing.T) {
	opts := inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}
	for _, p := range protocols {
		t.Run("server-stream/"+p.name, func(t *testing.T) {
			ts := startServer(t, opts)
			st, err := ts.count(p).CallServerStream(t.Context(), connect.NewRequest(wrapperspb.String(msgHold)))
			if err != nil {
				t.Fatal(err)
			}
			if !st.Receive() || st.Msg().GetValue() != "1" {
				t.Fatalf("first message: %v", st.Err())
			}
			if s := ts.mw.Stats(); s.InFlight != 1 {
				t.Errorf("a streaming call mid-stream: InFlight %d, want 1", s.InFlight)
			}
			_, err = ts.say(p).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x")))
			expectCode(t, "unary beside the stream", err, connect.CodeUnavailable, inbound.CodeBulkheadFull, "full")
			ts.svc.open()
			if !st.Receive() || st.Msg().GetValue() != "2" {
				t.Fatalf("second message: %v", st.Err())
			}
			if st.Receive() || st.Err() != nil {
				t.Fatalf("end of stream: %v", st.Err())
			}
			_ = st.Close()
			waitFor(t, "the stream's permit back", func() bool { return ts.mw.Stats().InFlight == 0 })
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
			if s := ts.mw.Stats(); s.InFlight != 1 {
				t.Errorf("a bidi call mid-stream: InFlight %d, want 1", s.InFlight)
			}
			_, err := ts.say(p).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x")))
			expectCode(t, "unary beside the stream", err, connect.CodeUnavailable, inbound.CodeBulkheadFull, "full")
			ts.svc.open()
			_ = bidi.CloseRequest()
			if _, err := bidi.Receive(); err == nil {
				t.Fatal("a message after the end")
			}
			_ = bidi.CloseResponse()
			waitFor(t, "the stream's permit back", func() bool { return ts.mw.Stats().InFlight == 0 })
		})
	}
}

// TestRateLimit: a call over the rate limit is ResourceExhausted with
// RATE_LIMITED, the wait as Retry-After, grpc-retry-pushback-ms and
// RetryInfo, and the RateLimit fields as metadata; an admitted call's
// response carries the RateLimit fields, with and without a timeout; the
// key function reads the procedure through CallFrom.
func TestRateLimit(t *testing.T) {
	for _, p := range protocols {
		for _, timed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/timed=%v", p.name, timed), func(t *testing.T) {
				byProcedure := func(ctx context.Context) string {
					c, ok := resilienceconnect.CallFrom(ctx)
					if !ok {
						return ""
					}
					return c.Procedure
				}
				opts := inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Hour, Key: byProcedure}}
				if timed {
					opts.Timeout = time.Minute
				}
				ts := startServer(t, opts)
				res, err := ts.say(p).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("a")))
				if err != nil {
					t.Fatal(err)
				}
				if got := res.Header().Get("RateLimit-Remaining"); got != "0" {
					t.Errorf("admitted call's RateLimit-Remaining %q, want 0", got)
				}
				ts.svc.waitEntered(t, sayProcedure)
				_, err = ts.say(p).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("b")))
				ce := expectCode(t, "second call", err, connect.CodeResourceExhausted, inbound.CodeRateLimited, "")
				ra, _ := strconv.Atoi(ce.Meta().Get("Retry-After"))
				push, _ := strconv.Atoi(ce.Meta().Get("Grpc-Retry-Pushback-Ms"))
				if ra < 1 || ra > 3600 || push <= 0 || push > 3600*1000 {
					t.Errorf("Retry-After %q, pushback %q: want the window's wait", ce.Meta().Get("Retry-After"), ce.Meta().Get("Grpc-Retry-Pushback-Ms"))
				}
				if d, ok := retryDelayOf(ce); !ok || d <= 0 || d > time.Hour {
					t.Errorf("RetryInfo delay %v (%v)", d, ok)
				}
				if got := ce.Meta().Get("RateLimit-Limit"); got != "1" {
					t.Errorf("RateLimit-Limit %q, want 1", got)
				}
				// Another procedure has a quota of its own.
				st, err := ts.count(p).CallServerStream(t.Context(), connect.NewRequest(wrapperspb.String("go")))
				if err != nil {
					t.Fatal(err)
				}
				for st.Receive() {
				}
				if err := st.Err(); err != nil {
					t.Errorf("another procedure: %v", err)
				}
				_ = st.Close()
				ts.svc.waitEntered(t, countProcedure)
				ts.svc.notEntered(t)
			})
		}
	}
}

// TestDrainRefusesUnavailable: once the middleware drains for shutdown, a
// new call is refused Unavailable with the shutting-down reason in every
// protocol, and a running one finishes.
func TestDrainRefusesUnavailable(t *testing.T) {
	ts := startServer(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4}})
	held := ts.callSay(t.Context(), protocols[0], msgHold)
	ts.svc.waitEntered(t, sayProcedure)
	drained := make(chan error, 1)
	go func() { drained <- ts.mw.Inbound().Drain(t.Context()) }()
	waitFor(t, "draining", func() bool {
		_, err := ts.say(protocols[1]).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x")))
		return err != nil
	})
	for _, p := range protocols {
		_, err := ts.say(p).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x")))
		expectCode(t, p.name, err, connect.CodeUnavailable, inbound.CodeBulkheadFull, string(resilience.ReasonShuttingDown))
	}
	ts.svc.open()
	if err := await(t, "the running call", held); err != nil {
		t.Errorf("the running call: %v", err)
	}
	if err := await(t, "Drain", drained); err != nil {
		t.Errorf("Drain: %v", err)
	}
}
