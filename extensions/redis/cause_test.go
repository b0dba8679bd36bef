package resilienceredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// TestReasonOfRedisErrors protects the bounded causes of a failed take,
// from the errors a real server and a refused connection give.
func TestReasonOfRedisErrors(t *testing.T) {
	srv := startRedis(t)
	c := srv.Client()
	ctx := context.Background()
	scriptErr := c.Do(ctx, "EVAL", "return redis.call('NOSUCHCOMMAND')", 0).Err()
	refused := unreachableClient(t).Ping(ctx).Err()
	for _, tc := range []struct {
		err  error
		want ratelimit.StoreReason
	}{
		{scriptErr, ratelimit.StoreScriptError},
		{refused, ratelimit.StoreConnectionRefused},
		{ErrBudgetExceeded, ratelimit.StoreTimeout},
		{context.DeadlineExceeded, ratelimit.StoreTimeout},
		{context.Canceled, ratelimit.StoreCanceled},
		{redis.ErrClosed, ratelimit.StoreConnectionRefused},
		{&resilience.BrokenCircuitError{RetryAfter: time.Second}, ratelimit.StoreCircuitOpen},
		{errors.New("something else"), ratelimit.StoreOther},
	} {
		if tc.err == nil {
			t.Fatalf("no error from the server for %q", tc.want)
		}
		if got := reasonOf(fmt.Errorf("w: %w", tc.err)); got != tc.want {
			t.Errorf("reasonOf(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}

	// Through Take: a refused connection is reported as such at once, not
	// as a budget run out in go-redis's retries.
	store, err := New(Options{Client: unreachableClient(t), Budget: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Take(ctx, "k", ratelimit.Policy{Name: "p", Limit: 1, Window: time.Second})
	var se *ratelimit.StoreError
	if !errors.As(err, &se) || se.Reason != ratelimit.StoreConnectionRefused {
		t.Fatalf("take against a closed port: %v, want a StoreError with connection-refused", err)
	}
	// The breaker's rejection is circuit-open.
	brk, err := resilience.NewCircuitBreaker(resilience.CircuitBreakerOptions[ratelimit.Decision]{Name: "redis"})
	if err != nil {
		t.Fatal(err)
	}
	brk.Isolate(ctx)
	store, _ = New(Options{Client: unreachableClient(t), Breaker: brk})
	_, err = store.Take(ctx, "k", ratelimit.Policy{Name: "p", Limit: 1, Window: time.Second})
	if r := ratelimit.ReasonOf(err); r != ratelimit.StoreCircuitOpen || !errors.Is(err, resilience.ErrBrokenCircuit) {
		t.Fatalf("isolated breaker: %v (cause %q), want circuit-open matching ErrBrokenCircuit", err, r)
	}
}

// TestNodeBreaker protects the per-node breaker's states: closed until
// NodeFailures node failures in a row (an answer resets the count, a
// caller leaving does not count), open until the break, then one probe
// at a time, which closes it by an answer or reopens it.
func TestNodeBreaker(t *testing.T) {
	ns := &nodes{brk: time.Hour, log: slog.New(slog.DiscardHandler)}
	n := ns.get("a:1")
	ctx := context.Background()
	now := time.Now().UnixNano()
	fail := func(probe bool) { ns.done(ctx, n, probe, ratelimit.StoreTimeout) }
	for range NodeFailures - 1 {
		fail(false)
	}
	ns.done(ctx, n, false, "") // an answer
	for range NodeFailures - 1 {
		fail(false)
	}
	ns.done(ctx, n, false, ratelimit.StoreCanceled)
	ns.done(ctx, n, false, ratelimit.StoreScriptError) // the node answered
	if ok, _ := n.admit(now); !ok {
		t.Fatal("open before NodeFailures failures in a row")
	}
	for range NodeFailures {
		fail(false)
	}
	if ok, _ := n.admit(time.Now().UnixNano()); ok {
		t.Fatal("closed after NodeFailures failures in a row")
	}
	if ns.get("b:1") == n {
		t.Fatal("two nodes share a breaker")
	}
	if ok, _ := ns.get("b:1").admit(now); !ok {
		t.Fatal("another node's keys refused")
	}
	later := time.Now().Add(2 * time.Hour).UnixNano()
	ok, probe := n.admit(later)
	if !ok || !probe {
		t.Fatalf("after the break: admit %v probe %v, want the probe", ok, probe)
	}
	if ok, _ := n.admit(later); ok {
		t.Fatal("a second take admitted during the probe")
	}
	fail(true)
	if ok, _ := n.admit(time.Now().Add(30 * time.Minute).UnixNano()); ok {
		t.Fatal("a failed probe did not reopen the breaker")
	}
	ok, probe = n.admit(time.Now().Add(3 * time.Hour).UnixNano())
	if !ok || !probe {
		t.Fatal("no probe after the second break")
	}
	ns.done(ctx, n, true, "")
	if ok, probe := n.admit(now); !ok || probe {
		t.Fatalf("after an answered probe: admit %v probe %v, want closed", ok, probe)
	}
}
