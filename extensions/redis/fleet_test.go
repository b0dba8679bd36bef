package resilienceredis

import (
	"context"
	"errors"
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// instance is one service instance: an inbound middleware whose rate
// limiter keeps its counters in Redis through a client of its own.
type instance struct {
	srv    *httptest.Server
	events chan event.Event
}

// newInstance makes an instance; ctxTimeouts sets the client's
// ContextTimeoutEnabled, which lets the store call Redis inline.
func newInstance(t *testing.T, addr string, rl resilience.RateLimiterOptions, budget time.Duration, ctxTimeouts bool) *instance {
	t.Helper()
	client := redis.NewClient(&redis.Options{
		Addr: addr, ContextTimeoutEnabled: ctxTimeouts,
		// Timeouts far past the budget: the store, not the client, must
		// bound the wait.
		DialTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
	})
	t.Cleanup(func() { client.Close() })
	store, err := New(Options{Client: client, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	if store.inline != ctxTimeouts {
		t.Fatalf("inline %v with ContextTimeoutEnabled %v", store.inline, ctxTimeouts)
	}
	rl.Store = store
	if rl.Key == nil {
		rl.Key = by.Header("X-Client")
	}
	in := &instance{events: make(chan event.Event, 1024)}
	m, err := inbound.New(inbound.Options{
		RateLimit: &rl,
		Listener: event.ListenerFunc(func(_ context.Context, e event.Event) {
			select {
			case in.events <- e:
			default:
			}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	in.srv = httptest.NewUnstartedServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	})))
	// net/http recovers a handler's panic and logs it here: a panic
	// anywhere on the request path fails the test.
	var errLog syncBuffer
	in.srv.Config.ErrorLog = log.New(&errLog, "", 0)
	in.srv.Start()
	t.Cleanup(func() {
		in.srv.Close()
		if s := errLog.String(); strings.Contains(s, "panic") {
			t.Errorf("the server logged a panic:\n%s", s)
		}
	})
	return in
}

type reply struct {
	status    int
	remaining string // Ratelimit-Remaining, "" when absent
	body      string
	took      time.Duration
}

// get sends one request as client; it fails the test on a transport
// error, so call it from the test's goroutine only (do elsewhere).
func (in *instance) get(t *testing.T, client string) reply {
	t.Helper()
	r, err := in.do(client)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (in *instance) do(client string) (reply, error) {
	req, _ := http.NewRequest(http.MethodGet, in.srv.URL, nil)
	req.Header.Set("X-Client", client)
	start := time.Now()
	resp, err := in.srv.Client().Do(req)
	if err != nil {
		return reply{}, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, remaining: resp.Header.Get("Ratelimit-Remaining"), body: string(b), took: time.Since(start)}, nil
}

// TestTwoInstancesShareOneLimitPerKey protects the point of a shared
// store: two instances behind a load balancer enforce one limit per key
// together (not one each), over real HTTP, for every algorithm; each key
// has its own quota; and a concurrent burst across both instances never
// gets more than the limit through (the scripts are atomic).
func TestTwoInstancesShareOneLimitPerKey(t *testing.T) {
	srv := startRedis(t)
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.TokenBucket} {
		t.Run(string(alg), func(t *testing.T) {
			// A long window: no permit comes back while the test runs.
			rl := resilience.RateLimiterOptions{Name: "api-" + string(alg), Algorithm: alg, PermitLimit: 5, Window: time.Hour}
			a := newInstance(t, srv.Addr(), rl, time.Second, false)
			b := newInstance(t, srv.Addr(), rl, time.Second, true)
			for _, key := range []string{"alice", "bob"} {
				for i := range 8 {
					in := a
					if i%2 == 1 {
						in = b
					}
					r := in.get(t, key)
					if i < 5 {
						if r.status != http.StatusOK || r.remaining != strconv.Itoa(4-i) {
							t.Fatalf("%s request %d: status %d remaining %q, want 200 and %d", key, i, r.status, r.remaining, 4-i)
						}
					} else if r.status != http.StatusTooManyRequests {
						t.Fatalf("%s request %d: status %d, want 429", key, i, r.status)
					}
				}
			}

			var ok atomic.Int64
			var wg sync.WaitGroup
			for i := range 40 {
				in := a
				if i%2 == 1 {
					in = b
				}
				wg.Go(func() {
					r, err := in.do("burst")
					if err != nil {
						t.Error(err)
					} else if r.status == http.StatusOK {
						ok.Add(1)
					}
				})
			}
			wg.Wait()
			if n := ok.Load(); n != 5 {
				t.Fatalf("a burst of 40 across two instances let %d through, want 5", n)
			}
		})
	}
}

// storeErrors drains the instance's events and returns the store-error
// events among them.
func (in *instance) storeErrors() []event.Event {
	var out []event.Event
	for {
		select {
		case e := <-in.events:
			if e.Name == event.RateLimiterStoreError {
				out = append(out, e)
			}
		default:
			return out
		}
	}
}

// TestRedisOutageFailsWithinBudget protects the request path from a Redis
// outage: while Redis hangs (paused) or is gone (stopped), no request waits
// much past the store's budget although the client's own timeouts are
// 10 s; a fail-open limiter serves the request without RateLimit headers
// and emits the store-error event (reason fail-open, error matching
// ErrBudgetExceeded or the connection failure); a fail-closed one answers
// 503 without internal error text; and decisions resume by themselves once
// Redis is back, after a restart too. It runs with both ways of holding the
// budget: the client's own (ContextTimeoutEnabled, inline) and the store's
// goroutine.
func TestRedisOutageFailsWithinBudget(t *testing.T) {
	for _, ctxTimeouts := range []bool{true, false} {
		t.Run("ContextTimeoutEnabled="+strconv.FormatBool(ctxTimeouts), func(t *testing.T) {
			testRedisOutage(t, ctxTimeouts)
		})
	}
}

func testRedisOutage(t *testing.T, ctxTimeouts bool) {
	srv := startRedis(t)
	const budget = 200 * time.Millisecond
	const slack = 1500 * time.Millisecond // loopback on a loaded machine; far below the 10 s client timeouts
	open := newInstance(t, srv.Addr(), resilience.RateLimiterOptions{Name: "open", PermitLimit: 100, Window: time.Hour}, budget, ctxTimeouts)
	closed := newInstance(t, srv.Addr(), resilience.RateLimiterOptions{Name: "closed", PermitLimit: 100, Window: time.Hour, FailClosed: true}, budget, ctxTimeouts)

	if r := open.get(t, "k"); r.status != http.StatusOK || r.remaining != "99" {
		t.Fatalf("healthy: %+v", r)
	}

	outage := func(phase string, wantBudgetErr bool) {
		t.Helper()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 3 {
					r, err := open.do("k")
					if err != nil {
						t.Errorf("%s, fail open: %v", phase, err)
					} else if r.status != http.StatusOK || r.remaining != "" || r.took > budget+slack {
						t.Errorf("%s, fail open: status %d remaining %q after %v; want 200, no headers, within %v", phase, r.status, r.remaining, r.took, budget+slack)
					}
					r, err = closed.do("k")
					if err != nil {
						t.Errorf("%s, fail closed: %v", phase, err)
					} else if r.status != http.StatusServiceUnavailable || r.took > budget+slack || strings.Contains(r.body, "redis") {
						t.Errorf("%s, fail closed: status %d body %q after %v; want 503 without the cause, within %v", phase, r.status, r.body, r.took, budget+slack)
					}
				}
			})
		}
		wg.Wait()
		evs := open.storeErrors()
		if len(evs) != 24 {
			t.Errorf("%s: %d store-error events, want 24", phase, len(evs))
		}
		for _, e := range evs {
			if e.Reason != "fail-open" || !errors.Is(e.Err, resilience.ErrRateLimitStore) {
				t.Errorf("%s: event %+v", phase, e)
			}
			if wantBudgetErr && !errors.Is(e.Err, ErrBudgetExceeded) {
				t.Errorf("%s: error %v does not match ErrBudgetExceeded", phase, e.Err)
			}
		}
		for _, e := range closed.storeErrors() {
			if e.Reason != "fail-closed" {
				t.Errorf("%s: fail-closed event %+v", phase, e)
			}
		}
	}
	// recovers polls until the instance decides again (RateLimit headers).
	recovers := func(phase string, in *instance) reply {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := in.get(t, "k")
			if r.remaining != "" {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no decision 20 s after Redis came back (last %+v)", phase, r)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	srv.Pause()
	outage("paused", true)
	srv.Resume()
	if r := recovers("resumed", open); r.remaining == "99" || r.remaining == "" {
		t.Fatalf("resumed: remaining %q; the counter kept in Redis should have gone on from 99", r.remaining)
	}
	recovers("resumed", closed)

	srv.Stop()
	outage("stopped", false)
	srv.Start()
	// Nothing was persisted: the restarted Redis starts every key afresh.
	if r := recovers("restarted", open); r.remaining != "99" {
		t.Fatalf("restarted: remaining %q, want 99", r.remaining)
	}
	recovers("restarted", closed)
}

// TestRedisStoppedMidRun protects the request path when Redis goes away
// under load, not between requests: while eight clients keep sending
// through two instances (one holding the budget through the client, one
// with the store's goroutine), Redis is stopped with takes in flight and
// later restarted on the same port. No request fails at the transport or
// waits much past the budget, none gets anything but 200 (fail open),
// nothing panics, and both instances decide again by themselves after
// the restart, enforcing the shared limit once more.
func TestRedisStoppedMidRun(t *testing.T) {
	srv := startRedis(t)
	const budget = 200 * time.Millisecond
	const slack = 1500 * time.Millisecond
	rl := resilience.RateLimiterOptions{Name: "midrun", PermitLimit: 5, Window: time.Hour}
	insts := []*instance{
		newInstance(t, srv.Addr(), rl, budget, true),
		newInstance(t, srv.Addr(), rl, budget, false),
	}

	// Each request has a key of its own (5 per hour would refuse a
	// repeated one); decided[i] counts instance i's answers with RateLimit
	// headers, undecided[i] its fail-open answers.
	var decided, undecided [2]atomic.Int64
	var seq, slowest atomic.Int64 // slowest: the longest answer, in ns
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := g % 2
				g++
				r, err := insts[i].do("load-" + strconv.FormatInt(seq.Add(1), 10))
				raiseTo(&slowest, int64(r.took))
				switch {
				case err != nil:
					t.Errorf("instance %d: %v", i, err)
					return
				case r.status != http.StatusOK || r.took > budget+slack:
					t.Errorf("instance %d: status %d after %v; want 200 within %v", i, r.status, r.took, budget+slack)
				case r.remaining != "":
					decided[i].Add(1)
				default:
					undecided[i].Add(1)
				}
			}
		})
	}
	// waitFor polls cond (the clients' counters) for at most 30 s.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("%s: not within 30 s (decided %d/%d, undecided %d/%d)", what,
					decided[0].Load(), decided[1].Load(), undecided[0].Load(), undecided[1].Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	both := func(c *[2]atomic.Int64, atLeast [2]int64) func() bool {
		return func() bool { return c[0].Load() >= atLeast[0] && c[1].Load() >= atLeast[1] }
	}

	waitFor("decisions while Redis is up", both(&decided, [2]int64{20, 20}))
	srv.Stop() // takes are in flight on both instances
	waitFor("fail-open answers while Redis is down", both(&undecided, [2]int64{10, 10}))
	srv.Start()
	after := [2]int64{decided[0].Load() + 10, decided[1].Load() + 10}
	waitFor("decisions after the restart", both(&decided, after))
	close(stop)
	wg.Wait()
	t.Logf("%d requests, the slowest answered in %v (budget %v)", seq.Load(), time.Duration(slowest.Load()), budget)

	for i, in := range insts {
		var failOpen int
		for _, e := range in.storeErrors() {
			if e.Reason != "fail-open" {
				t.Errorf("instance %d: store-error event %+v", i, e)
			}
			failOpen++
		}
		if failOpen == 0 {
			t.Errorf("instance %d: no store-error events during the outage", i)
		}
	}
	// The limit is shared and enforced again: five for one key across both
	// instances, then 429.
	for i := range 7 {
		r := insts[i%2].get(t, "after-restart")
		if want := http.StatusOK; i >= 5 {
			if r.status != http.StatusTooManyRequests {
				t.Fatalf("request %d after the restart: status %d, want 429", i, r.status)
			}
		} else if r.status != want || r.remaining != strconv.Itoa(4-i) {
			t.Fatalf("request %d after the restart: status %d remaining %q, want 200 and %d", i, r.status, r.remaining, 4-i)
		}
	}
}

// raiseTo sets a to v if v is larger.
func raiseTo(a *atomic.Int64, v int64) {
	for old := a.Load(); v > old && !a.CompareAndSwap(old, v); old = a.Load() {
	}
}

// TestBreakerMakesOutageCheap protects the breaker option: once Redis has
// failed enough takes to open it, a take fails at once with the breaker's
// rejection instead of waiting out the budget; the breaker's events reach
// the listener; and a probe closes it again when Redis is back.
func TestBreakerMakesOutageCheap(t *testing.T) {
	srv := startRedis(t)
	cb, err := resilience.NewCircuitBreaker(resilience.CircuitBreakerOptions[ratelimit.Decision]{
		Name: "redis", FailureRatio: 0.5, MinimumThroughput: 2,
		SamplingDuration: 10 * time.Second, BreakDuration: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var opened, closed atomic.Int64
	store, err := New(Options{
		Client: srv.Client(), Budget: 100 * time.Millisecond, Breaker: cb,
		Listener: event.ListenerFunc(func(_ context.Context, e event.Event) {
			switch e.Name {
			case event.CircuitOpened:
				opened.Add(1)
			case event.CircuitClosed:
				closed.Add(1)
			}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	p := ratelimit.Policy{Name: "cb", Algorithm: ratelimit.FixedWindow, Limit: 10, Window: time.Hour}
	ctx := context.Background()
	if _, err := store.Take(ctx, "k", p); err != nil {
		t.Fatal(err)
	}

	srv.Pause()
	var budgetErrs, broken int
	for range 20 {
		_, err := store.Take(ctx, "k", p)
		var be *resilience.BrokenCircuitError
		switch {
		case errors.Is(err, ErrBudgetExceeded):
			budgetErrs++
		case errors.As(err, &be):
			broken++
		default:
			t.Fatalf("take during the outage: %v", err)
		}
	}
	srv.Resume()
	// The first failures open the breaker; every later take within the
	// break is refused without a call.
	if budgetErrs > 3 || broken < 17 || opened.Load() == 0 {
		t.Fatalf("%d budget errors, %d breaker rejections, %d openings; want the breaker to take over after the first failures", budgetErrs, broken, opened.Load())
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := store.Take(ctx, "k", p)
		if err == nil {
			if !d.Allowed || cb.State() != resilience.CircuitClosed || closed.Load() == 0 {
				t.Fatalf("after recovery: %+v, state %v, %d closings", d, cb.State(), closed.Load())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no decision 20 s after Redis came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestManyKeysBoundedByExpiry protects Redis memory under a flood of
// distinct keys: every key the store writes has a time to live no longer
// than its idle span, so 100 000 one-off keys all leave by themselves.
func TestManyKeysBoundedByExpiry(t *testing.T) {
	srv := startRedis(t)
	client := srv.Client()
	ctx := context.Background()
	store, err := New(Options{Client: client, Budget: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	before := usedMemory(t, client)
	const keys = 100_000
	policies := []ratelimit.Policy{
		{Name: "fw", Algorithm: ratelimit.FixedWindow, Limit: 10, Window: 2 * time.Second},
		{Name: "sw", Algorithm: ratelimit.SlidingWindow, Limit: 10, Window: time.Second}, // idle span 2 s
		{Name: "tb", Algorithm: ratelimit.TokenBucket, Limit: 10, Window: 2 * time.Second},
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= keys {
					return
				}
				if _, err := store.Take(ctx, "client-"+strconv.FormatInt(i, 10), policies[i%3]); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Every key held has a TTL (Redis counts them: expires == keys), none
	// longer than 2 s.
	n, err := client.DBSize(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ks, err := client.Info(ctx, "keyspace").Result()
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(ks, "db0:keys="); i >= 0 {
		var k, e int64
		line := strings.TrimSpace(strings.SplitN(ks[i:], "\n", 2)[0])
		if _, err := fmt.Sscanf(line, "db0:keys=%d,expires=%d", &k, &e); err != nil || k != e {
			t.Fatalf("keyspace %q: every key must have a TTL (%v)", line, err)
		}
	}
	iter := client.Scan(ctx, 0, "*", 1000).Iterator()
	for sampled := 0; iter.Next(ctx) && sampled < 2000; sampled++ {
		ttl, err := client.PTTL(ctx, iter.Val()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl == -2*time.Nanosecond { // expired since the scan
			continue
		}
		if ttl < 0 || ttl > 2*time.Second { // -1: no TTL
			t.Fatalf("key %s has TTL %v, want [0, 2s]", iter.Val(), ttl)
		}
	}
	peak := usedMemory(t, client)
	t.Logf("%d keys held after %d takes; used memory %d → %d bytes", n, keys, before, peak)

	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := client.DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys still held 60 s after the flood", n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if after := usedMemory(t, client); after > before+1<<20 {
		t.Fatalf("used memory %d bytes after expiry, %d before the flood", after, before)
	}
}

func usedMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}

// TestSkewedInstanceClocksAgree protects the choice of Redis's clock: an
// instance whose own clock is decades ahead (a synctest bubble, whose fake
// clock is moved past the real date) shares the window of an instance on
// the real clock. Had a store used its instance's clock, the skewed one
// would see the window long over and a whole quota.
func TestSkewedInstanceClocksAgree(t *testing.T) {
	srv := startRedis(t)
	ctx := context.Background()
	p := ratelimit.Policy{Name: "skew", Algorithm: ratelimit.FixedWindow, Limit: 4, Window: time.Minute}
	real, err := New(Options{Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	first, err := real.Take(ctx, "k", p)
	if err != nil || first.Remaining != 3 {
		t.Fatalf("real clock: %+v, %v", first, err)
	}

	synctest.Test(t, func(t *testing.T) {
		time.Sleep(50 * 365 * 24 * time.Hour) // the bubble's clock starts in 2000
		if time.Now().Year() < 2040 {
			t.Fatalf("the skewed clock reads %v", time.Now())
		}
		// Inside the bubble the client's deadlines would be on the fake
		// clock; without them it needs no clock at all.
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: -2, WriteTimeout: -2})
		defer c.Close()
		skewed, err := New(Options{Client: c, Budget: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for want := 2; want >= 0; want-- {
			d, err := skewed.Take(ctx, "k", p)
			if err != nil || !d.Allowed || d.Remaining != want {
				t.Fatalf("skewed clock: %+v, %v; want allowed with %d remaining", d, err, want)
			}
		}
		d, err := skewed.Take(ctx, "k", p)
		if err != nil || d.Allowed {
			t.Fatalf("skewed clock, fifth take: %+v, %v; want refused", d, err)
		}
		// Both see the same window end: the skewed instance's reset is the
		// real one's less the real time between the takes.
		lag := first.Reset - d.Reset
		if lag < 0 || lag > 30*time.Second {
			t.Fatalf("reset %v on the skewed instance, %v on the real one", d.Reset, first.Reset)
		}
	})
}
