package grpcinterop

import (
	"context"
	"strconv"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
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
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("code %v, want Unavailable", status.Code(err))
		}
		if len(as) != 3 {
			t.Fatalf("%d attempts, want 3 (the policy's maximum): the rejection was not retried", len(as))
		}
		checkSpacing(t, as)
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
		from := rec.count()
		err := invoke(ctx, cc)
		as := rec.since(from)
		t.Logf("attempts: %d, error: %v", len(as), err)
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("code %v, want ResourceExhausted", status.Code(err))
		}
		if len(as) != 1 || len(as[0].pushback) != 1 || as[0].pushback[0] != "-1" {
			t.Fatalf("attempts %+v, want one, with pushback -1", as)
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
		from := rec.count()
		err := invoke(context.Background(), cc)
		as := rec.since(from)
		t.Logf("attempts: %d, error: %v", len(as), err)
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("code %v, want Unavailable", status.Code(err))
		}
		if len(as) != 1 || len(as[0].pushback) != 1 || as[0].pushback[0] != "-1" {
			t.Fatalf("attempts %+v, want one, with pushback -1", as)
		}
		info, _ := details(t, err)
		if info.Reason != "BULKHEAD_FULL" || info.Metadata["reason"] != "shutting-down" {
			t.Errorf("ErrorInfo %v, want BULKHEAD_FULL, reason shutting-down", info)
		}
	})
}
