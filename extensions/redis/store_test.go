package resilienceredis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/ratelimit"
	"pgregory.net/rapid"
)

// step is one take of a side-by-side sequence: after gap, take for key.
type step struct {
	gap time.Duration
	key string
}

// sequence makes n takes over keys with random gaps (whole µs): bursts,
// gaps inside a window, across one or more boundaries. No key stays idle
// for its idle span (the in-memory store keeps such a key's window phase;
// Redis expires it and starts afresh, as documented), except that a token
// bucket may (its state is then full in both stores).
func sequence(seed uint64, p ratelimit.Policy, keys, n int) []step {
	rng := rand.New(rand.NewPCG(seed, 14))
	w := int64(p.Window / time.Microsecond)
	span := w
	if p.Algorithm == ratelimit.SlidingWindow {
		span = 2 * w
	}
	idle := make([]int64, keys)
	steps := make([]step, 0, n)
	k := 0
	for range n {
		var g int64
		switch rng.IntN(8) {
		case 0, 1, 2: // burst: drains the quota
		case 3:
			g = rng.Int64N(w/int64(p.Limit)/4 + 1)
		case 4:
			g = rng.Int64N(w/int64(p.Limit) + 1) // about one token's refill
		case 5:
			g = rng.Int64N(w)
		case 6:
			g = w - rng.Int64N(3) // at or just before a boundary
		default:
			g = rng.Int64N(3 * w)
		}
		if p.Algorithm != ratelimit.TokenBucket {
			for _, d := range idle {
				if d+g >= span {
					g = span - 1 - d
				}
			}
		}
		if rng.IntN(4) == 0 { // mostly one key at a time, so its quota runs out
			k = rng.IntN(keys)
		}
		for i := range idle {
			idle[i] += g
		}
		idle[k] = 0
		steps = append(steps, step{gap: time.Duration(g) * time.Microsecond, key: "k" + strconv.Itoa(k)})
	}
	return steps
}

// TestSameNumbersAsMemoryStore protects the promise that the RateLimit-*
// headers do not depend on the store: for the same sequence of takes at
// the same instants, the Redis store and the in-memory store give the same
// decision, limit, remaining, reset and retry-after, for every algorithm.
// The in-memory store runs on synctest's clock; the Redis scripts get the
// same instants through the test clock argument.
func TestSameNumbersAsMemoryStore(t *testing.T) {
	srv := startRedis(t)
	checkSameNumbers(t, srv.Client())
}

// TestClusterSameNumbersAsMemoryStore is TestSameNumbersAsMemoryStore on a
// Redis Cluster: each key's script runs on its slot's master, with the
// same numbers.
func TestClusterSameNumbersAsMemoryStore(t *testing.T) {
	checkSameNumbers(t, startCluster(t).Client())
}

// checkSameNumbers runs the side-by-side sequences through client.
func checkSameNumbers(t *testing.T, client redis.Scripter) {
	// Windows of 10 s and more: the keys' TTLs run on Redis's real clock
	// and must not expire during a case while the pinned clock stands still.
	shapes := []struct {
		limit  int
		window time.Duration
	}{
		{1, 30 * time.Second},
		{3, time.Minute},
		{7, 10 * time.Second},
		{13, 7*time.Second + 333*time.Microsecond},
		{60, time.Minute},
		{1000, 20 * time.Second},
		{100_000, 24 * time.Hour}, // Limit × Window near 2⁵³ µs: the split arithmetic
	}
	algs := []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.TokenBucket}
	var prefixes atomic.Int64
	for _, alg := range algs {
		for _, sh := range shapes {
			for seed := uint64(1); seed <= 2; seed++ {
				p := ratelimit.Policy{Name: "side", Algorithm: alg, Limit: sh.limit, Window: sh.window}
				t.Run(fmt.Sprintf("%s/%d-per-%v/seed%d", alg, sh.limit, sh.window, seed), func(t *testing.T) {
					n := 300
					if sh.limit > 1000 {
						n = 120
					}
					steps := sequence(seed, p, 3, n)
					sideBySide(t, t.Fatalf, client, fmt.Sprintf("side%d:", prefixes.Add(1)), 1_700_000_000_000_000+int64(seed)*12_345_678, p, steps, nil)
				})
			}
		}
	}
}

// sideBySide takes steps (each after its gap) for p from a fresh in-memory
// store on synctest's clock and from a new Store on client under prefix,
// whose scripts get the same instants through the test clock argument,
// starting at start (µs since the epoch). It calls fatalf at the first
// take the two stores decide differently. With costs nil each take is
// Take; otherwise step i is TakeN of costs[i].
func sideBySide(t *testing.T, fatalf func(format string, args ...any), client redis.Scripter, prefix string, start int64, p ratelimit.Policy, steps []step, costs []int) {
	take := func(s ratelimit.CostStore, i int) (ratelimit.Decision, error) {
		if costs == nil {
			return s.Take(context.Background(), steps[i].key, p)
		}
		return s.TakeN(context.Background(), steps[i].key, p, costs[i])
	}
	var want []ratelimit.Decision
	synctest.Test(t, func(t *testing.T) {
		mem := ratelimit.NewMemoryStore(0)
		for i, st := range steps {
			time.Sleep(st.gap)
			d, err := take(mem, i)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, d)
		}
	})

	store, err := New(Options{Client: client, Prefix: prefix, Budget: 5 * time.Second})
	if err != nil {
		fatalf("%v", err)
	}
	now := start
	store.clockArg = func() string { return strconv.FormatInt(now, 10) }
	for i, st := range steps {
		now += int64(st.gap / time.Microsecond)
		got, err := take(store, i)
		if err != nil {
			fatalf("%v", err)
		}
		if got != want[i] {
			if costs == nil {
				fatalf("take %d (%s after %v): redis %+v, memory %+v", i, st.key, st.gap, got, want[i])
			} else {
				fatalf("take %d of cost %d (%s after %v): redis %+v, memory %+v", i, costs[i], st.key, st.gap, got, want[i])
			}
		}
	}
}

// TestCheckPolicy protects the bounds of the scripts' exact arithmetic: a
// policy outside them is a *resilience.ConfigError naming the field, from
// CheckPolicy and from Take, and Take then sends nothing to Redis.
func TestCheckPolicy(t *testing.T) {
	s, err := New(Options{Client: unreachableClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		p     ratelimit.Policy
		field string
	}{
		{ratelimit.Policy{Name: "x", Limit: 1, Window: time.Second}, ""},
		{ratelimit.Policy{Name: "x", Limit: 100_000, Window: 24 * time.Hour}, ""},
		{ratelimit.Policy{Name: "x", Limit: 1, Window: MaxWindow - MaxWindow%time.Microsecond}, ""},
		{ratelimit.Policy{Name: "x", Algorithm: "leaky", Limit: 1, Window: time.Second}, "Policy.Algorithm"},
		{ratelimit.Policy{Name: "x", Limit: 0, Window: time.Second}, "Policy.Limit"},
		{ratelimit.Policy{Name: "x", Limit: 1, Window: 0}, "Policy.Window"},
		{ratelimit.Policy{Name: "x", Limit: 1, Window: time.Second + 1}, "Policy.Window"},
		{ratelimit.Policy{Name: "x", Limit: 1, Window: MaxWindow + time.Microsecond}, "Policy.Window"},
		{ratelimit.Policy{Name: "x", Limit: 1_000_000, Window: 24 * time.Hour}, "Policy.Limit"},
	}
	for _, c := range cases {
		err := s.CheckPolicy(c.p)
		var ce *resilience.ConfigError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: unexpected %v", c.p, err)
		case c.field != "" && (!errors.As(err, &ce) || ce.Field != c.field):
			t.Errorf("%+v: got %v, want a ConfigError for %s", c.p, err, c.field)
		}
		if c.field != "" {
			if _, err := s.Take(context.Background(), "k", c.p); !errors.As(err, &ce) {
				t.Errorf("%+v: Take returned %v, want the ConfigError", c.p, err)
			}
		}
	}
}

// TestNewOptions protects New's validation: a missing client or a negative
// budget is a ConfigError naming the field; defaults fill the rest.
func TestNewOptions(t *testing.T) {
	var ce *resilience.ConfigError
	if _, err := New(Options{}); !errors.As(err, &ce) || ce.Field != "Options.Client" {
		t.Errorf("no client: %v", err)
	}
	if _, err := New(Options{Client: unreachableClient(t), Budget: -1}); !errors.As(err, &ce) || ce.Field != "Options.Budget" {
		t.Errorf("negative budget: %v", err)
	}
	s, err := New(Options{Client: unreachableClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	if s.prefix != DefaultPrefix || s.budget != DefaultBudget {
		t.Errorf("defaults: prefix %q budget %v", s.prefix, s.budget)
	}
	var zero Store
	if _, err := zero.Take(context.Background(), "k", ratelimit.Policy{Limit: 1, Window: time.Second}); !errors.As(err, &ce) {
		t.Errorf("zero Store: %v", err)
	}
}

// TestKeysKeepPoliciesApart protects the key layout: policy names and keys
// that would concatenate to the same string stay distinct, and each
// algorithm has its own state.
func TestKeysKeepPoliciesApart(t *testing.T) {
	s, err := New(Options{Client: unreachableClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	p := func(name string, alg ratelimit.Algorithm) ratelimit.Policy {
		return ratelimit.Policy{Name: name, Algorithm: alg, Limit: 1, Window: time.Second}
	}
	seen := map[string]bool{}
	for _, k := range []string{
		s.key("b:c", p("a", "")),
		s.key("c", p("a:b", "")),
		s.key("fw:c", p("a", "")),
		s.key("c", p("a", ratelimit.SlidingWindow)),
		s.key("c", p("a", ratelimit.TokenBucket)),
		s.key("c", p("a", ratelimit.FixedWindow)),
	} {
		if seen[k] {
			t.Errorf("key %q made twice", k)
		}
		seen[k] = true
	}
}

// TestSameNumbersAsMemoryStoreRapid is TestSameNumbersAsMemoryStore with
// rapid choosing the policy (any algorithm, limits 1–50, windows of whole
// µs from 10 s to an hour) and the sequence, so shrinking finds the shortest
// disagreement if there is one.
func TestSameNumbersAsMemoryStoreRapid(t *testing.T) {
	srv := startRedis(t)
	client := srv.Client()
	var run atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		p, steps := drawSequence(rt, "rapid", 50)
		sideBySide(t, rt.Fatalf, client, fmt.Sprintf("rapid%d:", run.Add(1)), 1_700_000_000_000_000, p, steps, nil)
	})
}

// drawSequence draws, for a rapid test, a policy named name (any
// algorithm, a limit from 1 to maxLimit, a window of whole µs from 10 s to
// an hour) and a sequence of 1 to 60 takes over 1 to 3 keys.
func drawSequence(rt *rapid.T, name string, maxLimit int) (ratelimit.Policy, []step) {
	alg := rapid.SampledFrom([]ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.TokenBucket}).Draw(rt, "alg")
	p := ratelimit.Policy{
		Name: name, Algorithm: alg,
		Limit: rapid.IntRange(1, maxLimit).Draw(rt, "limit"),
		// At least 10 s: the keys' TTLs run on Redis's real clock and
		// must not expire while the pinned clock stands still.
		Window: time.Duration(rapid.Int64Range(int64(10*time.Second/time.Microsecond), int64(time.Hour/time.Microsecond)).Draw(rt, "windowµs")) * time.Microsecond,
	}
	return p, sequence(rapid.Uint64().Draw(rt, "seed"), p, rapid.IntRange(1, 3).Draw(rt, "keys"), rapid.IntRange(1, 60).Draw(rt, "takes"))
}

// TestKeysCarryPrefixAndExpireWithTheirWindow protects the key layout in
// Redis itself: every key a store writes starts with its prefix (the
// default one when none is set), stores with distinct prefixes on one
// Redis keep distinct counters, and each key's time to live is its idle
// span (one window; two for a sliding window), renewed by every take.
func TestKeysCarryPrefixAndExpireWithTheirWindow(t *testing.T) {
	srv := startRedis(t)
	client := srv.Client()
	ctx := context.Background()
	mk := func(prefix string) *Store {
		s, err := New(Options{Client: client, Prefix: prefix, Budget: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b, def := mk("svc-a:"), mk("svc-b:"), mk("")
	const window = 20 * time.Second
	spans := map[ratelimit.Algorithm]time.Duration{
		ratelimit.FixedWindow:   window,
		ratelimit.SlidingWindow: 2 * window,
		ratelimit.TokenBucket:   window,
	}
	for alg, span := range spans {
		p := ratelimit.Policy{Name: "prefixed", Algorithm: alg, Limit: 1, Window: window}
		for _, s := range []*Store{a, b, def} {
			if d, err := s.Take(ctx, "k", p); err != nil || !d.Allowed {
				t.Fatalf("%s, prefix %q, first take: %+v, %v", alg, s.prefix, d, err)
			}
		}
		// a's quota is spent; b's and the default store's are their own.
		if d, err := a.Take(ctx, "k", p); err != nil || d.Allowed {
			t.Fatalf("%s: second take on svc-a: %+v, %v; want refused", alg, d, err)
		}
		for _, s := range []*Store{a, b, def} {
			key := s.key("k", p)
			if !strings.HasPrefix(key, s.prefix) {
				t.Fatalf("key %q lacks the prefix %q", key, s.prefix)
			}
			ttl, err := client.PTTL(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			// The take just set it to the span; it can only have run down
			// since (by far less than half of it).
			if ttl <= span/2 || ttl > span {
				t.Errorf("%s, %s: TTL %v, want the idle span %v", alg, key, ttl, span)
			}
		}
	}
	keys, err := client.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, k := range keys {
		switch {
		case strings.HasPrefix(k, "svc-a:"):
			count["svc-a:"]++
		case strings.HasPrefix(k, "svc-b:"):
			count["svc-b:"]++
		case strings.HasPrefix(k, DefaultPrefix):
			count[DefaultPrefix]++
		default:
			t.Errorf("key %q carries no store's prefix", k)
		}
	}
	for _, pre := range []string{"svc-a:", "svc-b:", DefaultPrefix} {
		if count[pre] != 3 {
			t.Errorf("%d keys under %q, want 3 (one per algorithm): %v", count[pre], pre, keys)
		}
	}
}

// TestMissingRedisServerFailsUnderCI protects the promise that CI runs
// every Redis test: with no redis-server on PATH, startRedis fails the
// test when CI is set and skips it, naming the install command, when not.
// It runs this test binary again with an empty PATH.
func TestMissingRedisServerFailsUnderCI(t *testing.T) {
	if os.Getenv("RESILIENCEREDIS_PROBE") == "1" {
		startRedis(t)
		t.Log("redis-server started") // unreachable without the binary
		return
	}
	for _, ci := range []string{"true", ""} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingRedisServerFailsUnderCI$", "-test.v", "-test.count=1")
		env := []string{"RESILIENCEREDIS_PROBE=1", "PATH=" + t.TempDir()}
		if ci != "" {
			env = append(env, "CI="+ci)
		}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "CI=") {
				env = append(env, kv)
			}
		}
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case ci != "":
			if !errors.As(err, &exit) || !strings.Contains(string(out), "redis-server not found and CI is set") {
				t.Errorf("CI=%s, no binary: %v; want a failure saying so:\n%s", ci, err, out)
			}
		case err != nil || !strings.Contains(string(out), "--- "+"SKIP"):
			t.Errorf("CI unset, no binary: %v; want a skip:\n%s", err, out)
		}
		if !strings.Contains(string(out), installHint) {
			t.Errorf("CI=%q: the message does not name the install command %q:\n%s", ci, installHint, out)
		}
	}
}
