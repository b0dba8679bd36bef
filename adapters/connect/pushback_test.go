package resilienceconnect_test

import (
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// expectNoRetry checks the advice of a rejection that a retry cannot
// undo soon: a negative grpc-retry-pushback-ms (gRPC clients stop
// retrying) and, when wait is false, no wait advised at all.
func expectNoRetry(t *testing.T, what string, ce *connect.Error, wait bool) {
	t.Helper()
	if got := ce.Meta().Get("Grpc-Retry-Pushback-Ms"); got != "-1" {
		t.Errorf("%s: grpc-retry-pushback-ms %q, want -1", what, got)
	}
	if wait {
		return
	}
	if got := ce.Meta().Get("Retry-After"); got != "" {
		t.Errorf("%s: Retry-After %q, want none", what, got)
	}
	if d, ok := retryDelayOf(ce); ok {
		t.Errorf("%s: RetryInfo delay %v, want none", what, d)
	}
}

// TestPushbackSaysWhatRetryingDoes: a draining server, a deadline that
// passed before the handler ran and a rate limit whose wait outlasts the
// caller's deadline all tell gRPC clients not to retry (a negative
// pushback), in every protocol; the rate limit keeps its wait in
// Retry-After and RetryInfo for clients that reschedule the call.
func TestPushbackSaysWhatRetryingDoes(t *testing.T) {
	for _, p := range protocols {
		t.Run("shutting-down/"+p.name, func(t *testing.T) {
			ts := startServer(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
			if err := ts.mw.Inbound().Drain(t.Context()); err != nil {
				t.Fatal(err)
			}
			_, err := ts.say(p).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x")))
			ce := expectCode(t, "draining", err, connect.CodeUnavailable, inbound.CodeBulkheadFull, string(resilience.ReasonShuttingDown))
			expectNoRetry(t, "draining", ce, false)
			ts.svc.notEntered(t)
		})
		t.Run("deadline-expired/"+p.name, func(t *testing.T) {
			ts := startServer(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
			req := connect.NewRequest(wrapperspb.String("x"))
			timeoutHeader(p, req.Header(), "0")
			_, err := ts.say(p).CallUnary(t.Context(), req)
			ce := expectCode(t, "expired deadline", err, connect.CodeDeadlineExceeded, inbound.CodeTimeout, "")
			expectNoRetry(t, "expired deadline", ce, false)
			ts.svc.notEntered(t)
		})
		t.Run("deadline-while-queued/"+p.name, func(t *testing.T) {
			ts := startServer(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Minute}})
			held := ts.callSay(t.Context(), p, msgHold)
			ts.svc.waitEntered(t, sayProcedure)
			req := connect.NewRequest(wrapperspb.String("x"))
			timeoutHeader(p, req.Header(), "30")
			_, err := ts.say(p).CallUnary(t.Context(), req)
			ce := expectCode(t, "deadline while queued", err, connect.CodeDeadlineExceeded, inbound.CodeTimeout, "")
			expectNoRetry(t, "deadline while queued", ce, false)
			ts.svc.notEntered(t)
			ts.svc.open()
			if err := await(t, "held call", held); err != nil {
				t.Errorf("held call: %v", err)
			}
		})
		t.Run("rate-limit-beyond-deadline/"+p.name, func(t *testing.T) {
			ts := startServer(t, inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Hour}})
			if _, err := ts.say(p).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("a"))); err != nil {
				t.Fatal(err)
			}
			ts.svc.waitEntered(t, sayProcedure)
			req := connect.NewRequest(wrapperspb.String("b"))
			timeoutHeader(p, req.Header(), "60000")
			_, err := ts.say(p).CallUnary(t.Context(), req)
			ce := expectCode(t, "rate limited", err, connect.CodeResourceExhausted, inbound.CodeRateLimited, "")
			expectNoRetry(t, "rate limited", ce, true)
			if d, ok := retryDelayOf(ce); !ok || d < 59*time.Minute {
				t.Errorf("RetryInfo delay %v (%v), want the window's wait", d, ok)
			}
			ts.svc.notEntered(t)
		})
	}
}

// TestPushbackRoundsUp: the pushback is the rate limit's wait rounded up
// to the millisecond, so a client that retries at the pushback never
// arrives before the permit does.
func TestPushbackRoundsUp(t *testing.T) {
	// A token bucket of 3 per second refills one every 333.33… ms.
	ts := startServer(t, inbound.Options{RateLimit: &resilience.RateLimiterOptions{Algorithm: ratelimit.TokenBucket, PermitLimit: 3, Window: time.Second}})
	var ce *connect.Error
	for i := 0; i < 4 && ce == nil; i++ {
		_, err := ts.say(protocols[0]).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x")))
		if err != nil {
			ce = expectCode(t, "rate limited", err, connect.CodeResourceExhausted, inbound.CodeRateLimited, "")
		}
	}
	if ce == nil {
		t.Fatal("no call was rate limited")
	}
	d, ok := retryDelayOf(ce)
	if !ok {
		t.Fatal("no RetryInfo")
	}
	want := (d + time.Millisecond - 1) / time.Millisecond
	if got := ce.Meta().Get("Grpc-Retry-Pushback-Ms"); got != strconv.FormatInt(int64(want), 10) {
		t.Errorf("pushback %q for a wait of %v, want %d (rounded up)", got, d, want)
	}
}
