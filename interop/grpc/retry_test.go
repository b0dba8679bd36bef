package grpcinterop

import (
	"context"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// checkSpacing asserts that each retry began no sooner than 0.8 × the
// pushback of the attempt before it (the bound is loose on purpose: only a
// retry that ignored the pushback, at the policy's 10 ms backoff, fails
// it) and logs the spacings measured.
func checkSpacing(t *testing.T, as []attempt) {
	t.Helper()
	for i := 1; i < len(as); i++ {
		prev := as[i-1]
		if len(prev.pushback) != 1 {
			t.Errorf("attempt %d: grpc-retry-pushback-ms %q, want one value", i, prev.pushback)
			continue
		}
		ms, err := strconv.Atoi(prev.pushback[0])
		if err != nil || ms < 0 {
			t.Errorf("attempt %d: grpc-retry-pushback-ms %q, want a wait", i, prev.pushback[0])
			continue
		}
		gap := as[i].begin.Sub(prev.begin)
		t.Logf("attempt %d → %d: pushback %d ms, spacing %v", i, i+1, ms, gap.Round(time.Millisecond))
		if want := time.Duration(ms) * time.Millisecond * 8 / 10; gap < want {
			t.Errorf("attempt %d began %v after attempt %d, sooner than 0.8 × its pushback (%d ms)", i+1, gap, i, ms)
		}
	}
}

// details returns the ErrorInfo and RetryInfo details of err's status.
func details(t *testing.T, err error) (*errdetails.ErrorInfo, *errdetails.RetryInfo) {
	t.Helper()
	st, _ := status.FromError(err)
	var info *errdetails.ErrorInfo
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *errdetails.RetryInfo:
			retry = d
		case error:
			t.Errorf("detail: %v", d)
		}
	}
	if info == nil {
		t.Fatalf("%v: no ErrorInfo detail", err)
	}
	return info, retry
}

// sendRace reports whether err is grpc-go's io.EOF for a call answered
// before the client had written its request message: its Invoke then
// returns the failed write's io.EOF, not the status the server sent
// (grpc/grpc-go#7230), even though the attempt ended on that status and
// its retry policy acted on it. A server that refuses a call before
// reading it (as ours do, to spend nothing on it) makes that race
// possible; on a loaded machine it happens.
func sendRace(err error) bool { return errors.Is(err, io.EOF) }

// refusal makes calls of method until one returns the server's status
// rather than sendRace's io.EOF (at most 5), and returns its error and
// the attempts of each call. Every call's attempts must pass check.
func refusal(t *testing.T, cc *grpc.ClientConn, rec *attempts, ctx context.Context, check func([]attempt)) error {
	t.Helper()
	var err error
	for range 5 {
		from := rec.count()
		err = invoke(ctx, cc)
		as := rec.since(from)
		t.Logf("attempts: %d, error: %v", len(as), err)
		check(as)
		if !sendRace(err) {
			return err
		}
	}
	t.Fatalf("5 calls in a row ended in io.EOF, none in the server's status: %v", err)
	return nil
}

// oneAttemptNoRetry is a refusal check: one attempt, whose answer carried
// a pushback of -1.
func oneAttemptNoRetry(t *testing.T) func([]attempt) {
	return func(as []attempt) {
		t.Helper()
		if len(as) != 1 || len(as[0].pushback) != 1 || as[0].pushback[0] != "-1" {
			t.Fatalf("attempts %+v, want one, with pushback -1", as)
		}
	}
}

// A full limiter answers UNAVAILABLE with a pushback of the wait it
// advises; a client whose retry policy retries UNAVAILABLE makes every
// attempt the policy allows, each at least that wait after the last.
func TestRetryFullAtPushbackSpacing(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		g := newGate()
		srv := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, g.handle)
		cc, rec := dial(t, srv.addr, retryConfig(3, "UNAVAILABLE"))
		release := hold(t, cc, g)
		defer release()

		from := rec.count()
		err := invoke(context.Background(), cc)
		as := rec.since(from)
		t.Logf("attempts: %d, error: %v", len(as), err)
		if status.Code(err) != codes.Unavailable && !sendRace(err) {
			t.Fatalf("code %v, want Unavailable", status.Code(err))
		}
		if len(as) != 3 {
			t.Fatalf("%d attempts, want 3 (the policy's maximum): the rejection was not retried", len(as))
		}
		checkSpacing(t, as)

		// The details, from a client without a retry policy.
		once, onceRec := dial(t, srv.addr, "")
		err = refusal(t, once, onceRec, context.Background(), func([]attempt) {})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("code %v, want Unavailable", status.Code(err))
		}
		info, retry := details(t, err)
		if info.Reason != "BULKHEAD_FULL" || info.Domain != "resilience" || info.Metadata["reason"] != "full" {
			t.Errorf("ErrorInfo %v, want BULKHEAD_FULL in domain resilience, reason full", info)
		}
		if retry == nil || retry.RetryDelay.AsDuration() <= 0 {
			t.Errorf("RetryInfo %v, want a retry delay", retry)
		}
	})
}

// A rate limit answers RESOURCE_EXHAUSTED with a pushback of the time
// until its next permit; a client whose retry policy retries
// RESOURCE_EXHAUSTED waits that long and then succeeds.
func TestRetryRateLimitedAtPushbackSpacing(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		srv := tg.serve(t, inbound.Options{RateLimit: &resilience.RateLimiterOptions{
			Algorithm: ratelimit.TokenBucket, PermitLimit: 1, Window: 500 * time.Millisecond,
		}}, func(context.Context) error { return nil })
		cc, rec := dial(t, srv.addr, retryConfig(4, "RESOURCE_EXHAUSTED"))
		if err := invoke(context.Background(), cc); err != nil {
			t.Fatalf("first call: %v", err)
		}
		from := rec.count()
		err := invoke(context.Background(), cc)
		as := rec.since(from)
		t.Logf("attempts: %d, error: %v", len(as), err)
		if err != nil {
			t.Fatalf("call after the rate limit's wait: %v, want success", err)
		}
		if len(as) < 2 {
			t.Fatalf("%d attempts, want the rate-limited attempt retried", len(as))
		}
		checkSpacing(t, as)
	})
}

// A rate limit whose wait outlasts the caller's deadline sends a negative
// pushback: the client gets RESOURCE_EXHAUSTED at once, after one
// attempt, instead of sleeping into DEADLINE_EXCEEDED.
func TestRateLimitBeyondDeadlineStopsRetries(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		srv := tg.serve(t, inbound.Options{RateLimit: &resilience.RateLimiterOptions{
			Algorithm: ratelimit.TokenBucket, PermitLimit: 1, Window: time.Minute,
		}}, func(context.Context) error { return nil })
		cc, rec := dial(t, srv.addr, retryConfig(4, "RESOURCE_EXHAUSTED"))
		if err := invoke(context.Background(), cc); err != nil {
			t.Fatalf("first call: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := refusal(t, cc, rec, ctx, oneAttemptNoRetry(t))
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("code %v, want ResourceExhausted", status.Code(err))
		}
		info, retry := details(t, err)
		if info.Reason != "RATE_LIMITED" {
			t.Errorf("ErrorInfo %v, want RATE_LIMITED", info)
		}
		if retry == nil || retry.RetryDelay.AsDuration() < 50*time.Second {
			t.Errorf("RetryInfo %v, want the limiter's wait (about a minute)", retry)
		}
	})
}

// A draining server sends a negative pushback: the client's retry policy
// stops after one attempt.
func TestShuttingDownStopsRetries(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		srv := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4}}, func(context.Context) error { return nil })
		cc, rec := dial(t, srv.addr, retryConfig(4, "UNAVAILABLE"))
		if err := invoke(context.Background(), cc); err != nil {
			t.Fatalf("call before draining: %v", err)
		}
		srv.drain()
		err := refusal(t, cc, rec, context.Background(), oneAttemptNoRetry(t))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("code %v, want Unavailable", status.Code(err))
		}
		info, _ := details(t, err)
		if info.Reason != "BULKHEAD_FULL" || info.Metadata["reason"] != "shutting-down" {
			t.Errorf("ErrorInfo %v, want BULKHEAD_FULL, reason shutting-down", info)
		}
	})
}
