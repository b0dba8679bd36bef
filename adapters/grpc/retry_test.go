package resiliencegrpc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// retryConfig is a grpc-go service config whose retry policy retries
// UNAVAILABLE after 10 ms unless the server pushes back.
const retryConfig = `{"methodConfig":[{"name":[{"service":"grpc.testing.TestService"}],
 "retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.01s","backoffMultiplier":1,"retryableStatusCodes":["UNAVAILABLE"]}}]}`

// arrivals records when attempts of calls marked with the x-call
// metadata reach the server, before the middleware (a tap handle).
type arrivals struct {
	mu sync.Mutex
	at []time.Time
}

func (a *arrivals) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if len(info.Header.Get("x-call")) > 0 {
		a.mu.Lock()
		a.at = append(a.at, time.Now())
		a.mu.Unlock()
	}
	return ctx, nil
}

func (a *arrivals) times() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.at...)
}

// retriedAfterRefusal holds the only permit of a middleware built from
// opts (its Concurrency is set here), sends a call through a client with
// the retry policy, frees the permit once the call's first attempt is
// counted as refused, and returns when each attempt of the call arrived.
// The call must succeed.
func retriedAfterRefusal(t *testing.T, opts inbound.Options) []time.Time {
	t.Helper()
	var arr arrivals
	g := make(gate)
	svc, entered := holdOne(g)
	opts.Concurrency = &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}
	s := startWith(t, opts, svc, viaRegistrar, []grpc.ServerOption{grpc.InTapHandle(arr.tap)}, grpc.WithDefaultServiceConfig(retryConfig))
	defer g.open()
	held := s.callUnary(context.Background())
	receive(t, "held call in its handler", entered)
	retried := s.callUnary(metadata.AppendToOutgoingContext(context.Background(), "x-call", "retried"))
	// Free the permit only once the first attempt has been refused: the
	// tap sees an attempt before the middleware decides on it, so opening
	// the gate at its arrival could let that attempt through.
	s.waitStats("the first attempt refused", func(st inbound.Stats) bool { return st.RequestCounts.Full >= 1 })
	g.open()
	receive(t, "held call", held)
	if r := receive(t, "retried call", retried); r.err != nil {
		t.Fatalf("retried call: %v, want success on a later attempt", r.err)
	}
	return arr.times()
}

// TestRetryPolicyHonoursPushback: a grpc-go client with a retry policy
// waits the 1000 ms the capacity rejection pushes back (not its own 10 ms
// backoff) before its next attempt, which then succeeds.
func TestRetryPolicyHonoursPushback(t *testing.T) {
	at := retriedAfterRefusal(t, inbound.Options{})
	if len(at) != 2 {
		t.Fatalf("%d attempts, want 2", len(at))
	}
	// Loose: at least most of the pushback, well below the retry
	// policy's 10 ms backoff otherwise.
	if gap := at[1].Sub(at[0]); gap < 900*time.Millisecond || gap > 10*time.Second {
		t.Errorf("second attempt %v after the first, want about the 1000 ms pushback", gap)
	}
}

// TestRetryPolicyStopsOnShutdown: the negative pushback of a draining
// server stops the client's retry policy: one attempt, not three.
func TestRetryPolicyStopsOnShutdown(t *testing.T) {
	var arr arrivals
	s := startWith(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, &service{}, viaRegistrar,
		[]grpc.ServerOption{grpc.InTapHandle(arr.tap)}, grpc.WithDefaultServiceConfig(retryConfig))
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.mw.Inbound().Drain(ended)
	r := receive(t, "call", s.callUnary(metadata.AppendToOutgoingContext(context.Background(), "x-call", "once")))
	if status.Code(r.err) != codes.Unavailable {
		t.Fatalf("call: %v, want UNAVAILABLE", r.err)
	}
	if n := len(arr.times()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// TestRetryPolicyRetriesOnRateLimitedRoute: a capacity rejection on a
// rate-limited method is still trailers-only, RateLimit fields and all, so
// the client's retry policy retries it after the pushback, here
// Options.RetryAfter's 200 ms.
func TestRetryPolicyRetriesOnRateLimitedRoute(t *testing.T) {
	at := retriedAfterRefusal(t, inbound.Options{RetryAfter: 200 * time.Millisecond,
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 100, Window: time.Minute}})
	if len(at) < 2 {
		t.Fatalf("%d attempts, want a retry", len(at))
	}
	if gap := at[1].Sub(at[0]); gap < 180*time.Millisecond {
		t.Errorf("second attempt %v after the first, want about the 200 ms pushback", gap)
	}
}
