package resilienceredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

const (
	// DefaultPrefix starts every key the store writes.
	DefaultPrefix = "resilience:rl:"
	// DefaultBudget is the time a Take may wait for Redis when
	// Options.Budget is 0.
	DefaultBudget = 50 * time.Millisecond
	// MaxWindow is the longest window the store accepts (2⁵² ns, about 52
	// days): its scripts compute in float64, exact below 2⁵³.
	MaxWindow = time.Duration(1 << 52)
	// maxLimitWindow bounds Limit × Window in µs for the same reason.
	maxLimitWindow = 1 << 53
)

// ErrBudgetExceeded reports that Redis did not answer within the store's
// budget, so no decision was made. Take's error matches it with errors.Is;
// its cause is ratelimit.StoreTimeout.
var ErrBudgetExceeded = errors.New("resilienceredis: no answer from redis within the budget")

// Options configures a Store. New copies it.
type Options struct {
	// Client runs the scripts: a *redis.Client, *redis.ClusterClient,
	// *redis.Ring or anything else go-redis accepts as a Scripter.
	// Required. The store never closes it. Set ContextTimeoutEnabled on
	// it (a *redis.Client, ClusterClient or Ring): go-redis then bounds
	// every wait by the budget itself and a Take runs on the caller's
	// goroutine. Otherwise each Take runs the call on a goroutine of its
	// own to hold the budget, which costs a scheduler hand-off per
	// decision, and a call abandoned at the budget runs on (off the
	// request path) until the client's own timeouts.
	Client redis.Scripter
	// Prefix starts every key (default DefaultPrefix). Stores of unrelated
	// services sharing one Redis need distinct prefixes.
	Prefix string
	// Budget is the longest a Take waits for Redis, connection and retries
	// included (default DefaultBudget). Past it Take returns
	// ErrBudgetExceeded and the rate limiter fails open or closed as its
	// resilience.RateLimiterOptions.FailClosed says.
	Budget time.Duration
	// Breaker, when set, sits in front of Redis: once it opens, a Take
	// fails at once with the breaker's *resilience.BrokenCircuitError
	// instead of waiting out the budget, and its probes find Redis again
	// when it is back. Its events go to Listener.
	Breaker *resilience.CircuitBreaker[ratelimit.Decision]
	// Listener receives the breaker's events (pipeline name
	// "resilienceredis"). Nil drops them.
	Listener event.Listener
	// NodeBreak applies to a *redis.ClusterClient: once NodeFailures
	// takes in a row failed on one master (no answer within the budget,
	// a refused connection, CLUSTERDOWN), the takes of that master's
	// keys fail at once with ErrNodeDown for NodeBreak, then one probe
	// tries the master again, and so on until one gets an answer. Keys
	// of other masters are not affected, and neither is Breaker, which
	// sees only the takes tried. 0 means DefaultNodeBreak (1 s);
	// negative turns it off, and every take of a dead master waits out
	// the budget.
	NodeBreak time.Duration
	// Logger receives the store's own records: a cluster node it stopped
	// trying (Warn) and took back (Info), never one per request. Nil
	// means slog.Default(); slog.New(slog.DiscardHandler) silences it.
	// go-redis logs through a logger of its own, process-wide: see
	// NewRedisLogger.
	Logger *slog.Logger
}

// Store is a ratelimit.Store that keeps counters in Redis, so
// the instances of a fleet enforce one limit per key together. Use it as
// resilience.RateLimiterOptions.Store.
//
// Each decision is one Lua script, atomic in Redis, per algorithm: fixed
// window, sliding window and token bucket, with the same limit, remaining,
// reset and retry-after numbers as ratelimit.MemoryStore for the
// same sequence of takes, so the RateLimit-* headers do not depend on the
// store. Redis's clock (TIME) decides windows and refills, never the
// instance's, so instances whose clocks disagree still agree on decisions.
//
// Keys are Prefix, the policy name and the algorithm, then the rate-limit
// key; each expires once idle for its idle span (one window; two for a
// sliding window), so Redis holds only keys in use. An expired key starts
// afresh with a whole quota, as a key the in-memory store evicted: the
// numbers then differ from a store that kept it only in the phase of its
// windows.
//
// Policies must fit the scripts' exact arithmetic (see CheckPolicy).
//
// Safe for concurrent use. A Take waits at most Budget: a slow or
// unreachable Redis costs each request the budget (one fast failure with a
// Breaker once it opens), decisions resume by themselves when Redis is
// back, and a failed Take changes nothing (except one whose reply came
// after the budget: Redis may have counted it). Make it with New; the zero value
// is not usable.
type Store struct {
	client   redis.Scripter
	prefix   string
	budget   time.Duration
	breaker  *resilience.CircuitBreaker[ratelimit.Decision]
	tel      resilience.Telemetry
	fixed    *luaScript
	sliding  *luaScript
	bucket   *luaScript
	inline   bool                 // the client bounds its waits by the context's deadline
	cluster  *redis.ClusterClient // to refresh its topology after a failure
	proc     processor            // the client, to run a take without go-redis's retries
	nodes    *nodes               // a breaker per cluster master; nil without
	clockArg func() string        // tests only: the time argument of the scripts
	retried  bool                 // tests only: let go-redis retry, as before NoRetry (the contrast run)
}

// processor is what *redis.Client, *redis.ClusterClient and *redis.Ring
// have beyond a Scripter: the store runs its own commands through it.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// New returns a Store, or a *resilience.ConfigError naming the first
// invalid option.
func New(opts Options) (*Store, error) {
	if opts.Client == nil {
		return nil, &resilience.ConfigError{Field: "Options.Client", Problem: "is required"}
	}
	if opts.Budget < 0 {
		return nil, &resilience.ConfigError{Field: "Options.Budget", Problem: fmt.Sprintf("must not be negative, got %v", opts.Budget)}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s := &Store{
		client:  opts.Client,
		prefix:  opts.Prefix,
		budget:  opts.Budget,
		breaker: opts.Breaker,
		fixed:   newLuaScript(luaFixedWindow),
		sliding: newLuaScript(luaSlidingWindow),
		bucket:  newLuaScript(luaTokenBucket),
	}
	switch c := opts.Client.(type) {
	case *redis.Client:
		s.inline = c.Options().ContextTimeoutEnabled
		s.proc = c
	case *redis.ClusterClient:
		s.inline = c.Options().ContextTimeoutEnabled
		s.cluster = c
		s.proc = c
		if opts.NodeBreak >= 0 {
			brk := opts.NodeBreak
			if brk == 0 {
				brk = DefaultNodeBreak
			}
			s.nodes = &nodes{brk: brk, log: logger}
		}
	case *redis.Ring:
		s.inline = c.Options().ContextTimeoutEnabled
		s.proc = c
	}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	if s.budget == 0 {
		s.budget = DefaultBudget
	}
	if s.breaker != nil {
		s.tel = resilience.NewTelemetry("resilienceredis", resilience.StrategyName(s.breaker), opts.Listener)
	}
	return s, nil
}

// CheckPolicy reports whether the store can apply p, as a
// *resilience.ConfigError naming the ratelimit.Policy field. Beyond what
// every store requires (a known algorithm, a positive limit and window),
// the window must be a whole number of microseconds and at most MaxWindow,
// and Limit × Window in microseconds at most 2⁵³ (10⁵ permits a day,
// 3 000 a month). Take checks it too; call it at startup to fail early.
func (s *Store) CheckPolicy(p ratelimit.Policy) error {
	switch p.Algorithm {
	case "", ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.TokenBucket:
	default:
		return &resilience.ConfigError{Field: "Policy.Algorithm", Problem: fmt.Sprintf("unknown algorithm %q", string(p.Algorithm))}
	}
	if p.Limit <= 0 {
		return &resilience.ConfigError{Field: "Policy.Limit", Problem: fmt.Sprintf("must be greater than 0, got %d", p.Limit)}
	}
	if p.Window <= 0 || p.Window > MaxWindow {
		return &resilience.ConfigError{Field: "Policy.Window", Problem: fmt.Sprintf("must be in (0, %v], got %v", MaxWindow, p.Window)}
	}
	if p.Window%time.Microsecond != 0 {
		return &resilience.ConfigError{Field: "Policy.Window", Problem: fmt.Sprintf("must be a whole number of microseconds, got %v", p.Window)}
	}
	if w := int64(p.Window / time.Microsecond); int64(p.Limit) > maxLimitWindow/w {
		return &resilience.ConfigError{Field: "Policy.Limit", Problem: fmt.Sprintf("times the window in µs exceeds 2⁵³ (%d per %v)", p.Limit, p.Window)}
	}
	return nil
}

// Take implements ratelimit.Store. Its errors: a
// *resilience.ConfigError for a policy CheckPolicy refuses; ctx's error
// when ctx ends first; otherwise a *ratelimit.StoreError with the cause
// (errors.As), wrapping ErrBudgetExceeded (reason timeout), ErrNodeDown
// (node-down), the breaker's rejection (circuit-open) or Redis's error
// (connection-refused, cluster-down, redirect, script-error or other).
func (s *Store) Take(ctx context.Context, key string, policy ratelimit.Policy) (ratelimit.Decision, error) {
	return s.takeN(ctx, key, policy, 1)
}

// TakeN implements ratelimit.CostStore: Take for n permits, taken in the
// one script, all or none (n clamped to 1..policy.Limit). Its errors are
// Take's.
func (s *Store) TakeN(ctx context.Context, key string, policy ratelimit.Policy, n int) (ratelimit.Decision, error) {
	return s.takeN(ctx, key, policy, ratelimit.ClampCost(n, policy.Limit))
}

// takeN is Take for n permits, n in 1..policy.Limit.
func (s *Store) takeN(ctx context.Context, key string, policy ratelimit.Policy, cost int) (ratelimit.Decision, error) {
	if s.client == nil {
		return ratelimit.Decision{}, &resilience.ConfigError{Field: "Store", Problem: "not made by New"}
	}
	if err := s.CheckPolicy(policy); err != nil {
		return ratelimit.Decision{}, err
	}
	var n *node
	var probe bool
	if s.nodes != nil {
		// The master of the key's slot, from the client's slot map (no
		// round trip once it is loaded).
		if c, err := s.cluster.MasterForKey(ctx, s.key(key, policy)); err == nil {
			n = s.nodes.get(c.Options().Addr)
			var ok bool
			if ok, probe = n.admit(time.Now().UnixNano()); !ok {
				// Its slots may have a new master by now: the reload is
				// the client's lazy one, coalesced.
				s.cluster.ReloadState(ctx)
				return ratelimit.Decision{}, storeErr(ratelimit.StoreNodeDown, ErrNodeDown)
			}
		}
	}
	d, err := s.takeBroken(ctx, key, policy, cost)
	if n != nil {
		s.nodes.done(ctx, n, probe, ratelimit.ReasonOf(err))
	}
	return d, err
}

// takeBroken is take behind the breaker, when there is one.
func (s *Store) takeBroken(ctx context.Context, key string, policy ratelimit.Policy, cost int) (ratelimit.Decision, error) {
	if s.breaker == nil {
		return s.takeOnce(ctx, key, policy, cost)
	}
	d, err := s.breaker.ExecuteResult(ctx, s.tel, func(ctx context.Context) (ratelimit.Decision, error) {
		return s.takeOnce(ctx, key, policy, cost)
	})
	var se *ratelimit.StoreError
	if err != nil && ctx.Err() == nil && !errors.As(err, &se) {
		err = storeErr(reasonOf(err), err) // the breaker's own rejection
	}
	return d, err
}

// takeOnce is take, and after a failure that was not the caller's, a
// refresh of a cluster client's slot map: go-redis reloads it on a
// redirect or once a minute, not when a master stops answering, so
// without this the takes of a failed master's slots would go on failing
// after its replica took over. The reload is the client's lazy one:
// asynchronous, and coalesced however many takes fail.
func (s *Store) takeOnce(ctx context.Context, key string, p ratelimit.Policy, cost int) (ratelimit.Decision, error) {
	d, err := s.take(ctx, key, p, cost)
	if err != nil && s.cluster != nil && ctx.Err() == nil {
		s.cluster.ReloadState(ctx)
	}
	return d, err
}

type evalResult struct {
	v   []int64
	err error
}

// take runs the policy's script within the budget. go-redis ignores
// context deadlines on sockets unless ContextTimeoutEnabled is set, so
// without it the script runs on its own goroutine and a call that outlives
// the budget is abandoned, to end by the client's own timeouts.
func (s *Store) take(ctx context.Context, key string, p ratelimit.Policy, cost int) (ratelimit.Decision, error) {
	script, span := s.fixed, p.Window
	switch p.Algorithm {
	case ratelimit.SlidingWindow:
		script, span = s.sliding, 2*p.Window
	case ratelimit.TokenBucket:
		script = s.bucket
	}
	ttl := int64((span + time.Millisecond - 1) / time.Millisecond)
	var now string
	if s.clockArg != nil {
		now = s.clockArg()
	}
	args := []any{p.Limit, int64(p.Window / time.Microsecond), ttl, now}
	if cost > 1 {
		args = append(args, cost) // ARGV[5]; absent, the script takes one
	}
	keys := []string{s.key(key, p)}

	bctx, cancel := context.WithTimeout(ctx, s.budget)
	defer cancel()
	var r evalResult
	if s.inline {
		r.v, r.err = s.run(bctx, script, keys, args)
		return decision(ctx, bctx, p, r)
	}
	done := make(chan evalResult, 1)
	go func() {
		v, err := s.run(bctx, script, keys, args)
		done <- evalResult{v, err}
	}()
	select {
	case r = <-done:
	case <-bctx.Done():
		if err := ctx.Err(); err != nil {
			return ratelimit.Decision{}, err
		}
		return ratelimit.Decision{}, storeErr(ratelimit.StoreTimeout, ErrBudgetExceeded)
	}
	return decision(ctx, bctx, p, r)
}

// decision turns the script's reply into a decision, or classifies its
// error: the caller's context first, then the budget, then Redis's.
func decision(ctx, bctx context.Context, p ratelimit.Policy, r evalResult) (ratelimit.Decision, error) {
	if r.err != nil {
		if err := ctx.Err(); err != nil {
			return ratelimit.Decision{}, err
		}
		reason := reasonOf(r.err)
		if reason == ratelimit.StoreTimeout || (bctx.Err() != nil && reason == ratelimit.StoreCanceled) {
			// Not wrapped: the client's error would match
			// context.DeadlineExceeded, which reads as the request's own
			// deadline (a 504) rather than the store's failure.
			return ratelimit.Decision{}, storeErr(ratelimit.StoreTimeout, ErrBudgetExceeded)
		}
		return ratelimit.Decision{}, storeErr(reason, fmt.Errorf("resilienceredis: %w", r.err))
	}
	if len(r.v) != 4 {
		return ratelimit.Decision{}, storeErr(ratelimit.StoreScriptError, fmt.Errorf("resilienceredis: script replied with %d values, want 4", len(r.v)))
	}
	return ratelimit.Decision{
		Allowed:    r.v[0] == 1,
		Limit:      p.Limit,
		Remaining:  int(r.v[1]),
		Reset:      time.Duration(r.v[2]),
		RetryAfter: time.Duration(r.v[3]),
		Policy:     p,
	}, nil
}

// key builds the Redis key. The policy name is length-prefixed so no name
// or key can make two policies share a key; the algorithm is part of it
// because a state means nothing to another algorithm (the in-memory store
// resets it too).
func (s *Store) key(key string, p ratelimit.Policy) string {
	alg := "fw"
	switch p.Algorithm {
	case ratelimit.SlidingWindow:
		alg = "sw"
	case ratelimit.TokenBucket:
		alg = "tb"
	}
	b := make([]byte, 0, len(s.prefix)+len(p.Name)+len(key)+10)
	b = append(b, s.prefix...)
	b = strconv.AppendInt(b, int64(len(p.Name)), 10)
	b = append(b, ':')
	b = append(b, p.Name...)
	b = append(b, ':')
	b = append(b, alg...)
	b = append(b, ':')
	b = append(b, key...)
	return string(b)
}
