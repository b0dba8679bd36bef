package resilience

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/internal/config"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// RateLimitStoreError reports that a rate limiter's ratelimit.Store failed, so no decision
// was made. Match with errors.As, or errors.Is against ErrRateLimitStore; it
// unwraps to the store's error (a *ratelimit.StoreError, when the store
// reports its cause; Reason returns it). It is not a rejection (it does
// not match ErrRejected): the limiter could not decide.
type RateLimitStoreError struct {
	// Policy is the name of the policy being applied.
	Policy string
	// Err is the store's error.
	Err error
}

// ErrRateLimitStore matches *RateLimitStoreError.
var ErrRateLimitStore = errors.New("resilience: rate limit store failed")

func (e *RateLimitStoreError) Error() string {
	msg := "resilience: rate limit store failed for policy " + e.Policy
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the store's error.
func (e *RateLimitStoreError) Unwrap() error { return e.Err }

// Reason is the cause of the store's failure (ratelimit.ReasonOf of Err):
// a bounded label such as "timeout" or "cluster-down".
func (e *RateLimitStoreError) Reason() ratelimit.StoreReason { return ratelimit.ReasonOf(e.Err) }

// Is reports whether target is ErrRateLimitStore.
func (e *RateLimitStoreError) Is(target error) bool { return target == ErrRateLimitStore }

const (
	defaultRateLimitMaxKeyLength = 256
	// maxRateLimitMaxKeys bounds RateLimiterOptions.MaxKeys, as
	// ratelimit.NewMemoryStore does.
	maxRateLimitMaxKeys = math.MaxInt32
	// rateLimitKeyHashLen is the length of the hash that replaces the tail
	// of an over-long key: 16 bytes of SHA-256, base64url without padding.
	rateLimitKeyHashLen = 22
	// minRateLimitMaxKeyLength leaves room for the hash and a prefix.
	minRateLimitMaxKeyLength = 32
)

// RateLimiterOptions configures a RateLimiter. PermitLimit and Window are
// required; the zero value of every other field means its default. Key is
// called concurrently and must be safe for that.
type RateLimiterOptions struct {
	// Name labels telemetry (default "RateLimiter") and names the policy
	// (default "default"; see ratelimit.Policy.Name).
	Name string
	// Algorithm counts the permits; "" means ratelimit.FixedWindow, the
	// others are ratelimit.SlidingWindow and ratelimit.TokenBucket. Use
	// ratelimit.ParseAlgorithm for names from configuration.
	Algorithm ratelimit.Algorithm
	// PermitLimit is the number of permits per Window (> 0).
	PermitLimit int
	// Window is the period PermitLimit applies to (> 0).
	Window time.Duration
	// Key returns the partition an execution counts against (client IP, API
	// key, …); nil means one partition shared by every execution, here and
	// in inbound.Options. Each key has its own quota.
	Key func(ctx context.Context) string
	// Cost, when set, says how many permits an execution takes from its
	// key's quota (an export may count as many reads): Execute and Take
	// call it once per execution, with its context, and take that many
	// permits at once, all or none (a refused execution takes nothing).
	// A cost below 1 counts as 1, and a cost above PermitLimit as
	// PermitLimit (a whole window's quota, or a full bucket: more could
	// never pass). It needs a Store that takes n permits atomically, a
	// ratelimit.CostStore (the in-memory store and extensions/redis
	// are); NewRateLimiter refuses another. nil means 1 per execution.
	Cost func(ctx context.Context) int
	// MaxKeys caps the keys of the default in-memory store, so memory is
	// bounded whatever traffic arrives; idle keys are evicted first (see
	// ratelimit.MemoryStore). 0 means 10 000. Ignored when Store is set.
	MaxKeys int
	// MaxKeyLength caps the length in bytes of a key. A longer key is
	// replaced by its first MaxKeyLength−22 bytes followed by 22 characters
	// of its SHA-256 (base64url): distinct long keys stay distinct (even
	// with a long shared prefix), the same key always maps to the same
	// replacement (in every process, so a shared store still works), and no
	// stored key is longer than MaxKeyLength. 0 means 256; otherwise at
	// least 32.
	MaxKeyLength int
	// Store keeps the counters; nil means a new ratelimit.MemoryStore with
	// MaxKeys, private to this limiter.
	Store ratelimit.Store
	// FailClosed decides what happens when Store returns an error. By
	// default (false) the limiter fails open: the execution runs, because a
	// shared store's outage would otherwise turn into an outage of the whole
	// service, and the concurrency limiter behind the rate limiter still
	// protects it. Set FailClosed when the quota matters more than
	// availability (a paid API's metering): the execution is then refused
	// with the *RateLimitStoreError. Either way event.RateLimiterStoreError
	// is emitted. The in-memory store never fails.
	FailClosed bool
}

// RateLimiter admits executions while their key's quota lasts and rejects
// the rest with a *RateLimitRejectedError. Use it as a pipeline strategy
// (Builder.AddRateLimiter, or AddStrategy to share one limiter) or call
// Allow directly (an HTTP middleware does, to set the RateLimit-* headers
// on admitted responses too).
//
// Safe for concurrent use. The zero value is not usable: Execute and Allow
// return a *ConfigError without running anything. A rejected take consumes no permit; a store
// failure leaves the counters as the store left them (see FailClosed).
// Emits event.RateLimiterRejected (Reason event.ReasonRateLimited, Duration the
// retry-after) and event.RateLimiterStoreError. Its in-memory store reads
// the clock through time.Now, so a test using testing/synctest makes the
// limiter inside the bubble.
type RateLimiter struct {
	opts   RateLimiterOptions
	policy ratelimit.Policy
	live   atomic.Pointer[ratelimit.Policy] // set by Reconfigure; nil: policy
	store  ratelimit.Store
	maxLen int
}

// NewRateLimiter returns a rate limiter, or a *ConfigError naming the first
// invalid option.
func NewRateLimiter(opts RateLimiterOptions) (*RateLimiter, error) {
	l := &RateLimiter{opts: opts}
	if err := l.validate(); err != nil {
		return nil, err
	}
	l.opts.Algorithm, _ = ratelimit.ParseAlgorithm(string(l.opts.Algorithm)) // validated
	if l.opts.MaxKeyLength == 0 {
		l.opts.MaxKeyLength = defaultRateLimitMaxKeyLength
	}
	l.maxLen = l.opts.MaxKeyLength
	name := l.opts.Name
	if name == "" {
		name = "default"
	}
	l.policy = ratelimit.Policy{Name: name, Algorithm: l.opts.Algorithm, Limit: opts.PermitLimit, Window: opts.Window}
	l.store = opts.Store
	if l.store == nil {
		l.store = ratelimit.NewMemoryStore(opts.MaxKeys)
	}
	return l, nil
}

// AddRateLimiter appends a rate limiter configured by opts. Invalid options
// are reported by Build.
func (b *Builder[T]) AddRateLimiter(opts RateLimiterOptions) *Builder[T] {
	return b.addBuilt(NewRateLimiter(opts))
}

// validate reports the first invalid option as a *ConfigError.
func (l *RateLimiter) validate() error {
	o := &l.opts
	if _, err := ratelimit.ParseAlgorithm(string(o.Algorithm)); err != nil {
		return config.Rename("RateLimiterOptions.Algorithm", err)
	}
	if err := checkPositiveInt("RateLimiterOptions.PermitLimit", o.PermitLimit); err != nil {
		return err
	}
	if err := checkPositiveDuration("RateLimiterOptions.Window", o.Window); err != nil {
		return err
	}
	if err := checkNonNegativeInt("RateLimiterOptions.MaxKeys", o.MaxKeys); err != nil {
		return err
	}
	if o.MaxKeys > maxRateLimitMaxKeys {
		return configErrorf("RateLimiterOptions.MaxKeys", "is too large (%d); the maximum is %d", o.MaxKeys, maxRateLimitMaxKeys)
	}
	if err := validateRateCost(o); err != nil {
		return err
	}
	if err := checkNonNegativeInt("RateLimiterOptions.MaxKeyLength", o.MaxKeyLength); err != nil {
		return err
	}
	if o.MaxKeyLength != 0 && o.MaxKeyLength < minRateLimitMaxKeyLength {
		return configErrorf("RateLimiterOptions.MaxKeyLength",
			"must be 0 (default %d) or at least %d, got %d", defaultRateLimitMaxKeyLength, minRateLimitMaxKeyLength, o.MaxKeyLength)
	}
	return nil
}

// strategyName is the name used in telemetry (see StrategyName).
func (l *RateLimiter) strategyName() string {
	if l.opts.Name == "" {
		return "RateLimiter"
	}
	return l.opts.Name
}

// Policy returns the limiter's policy.
func (l *RateLimiter) Policy() ratelimit.Policy { return l.livePolicy() }

// Allow takes one permit (Cost's, when set) for the key opts.Key returns for ctx. A nil error
// comes with the store's decision. On a store failure the error is a
// *RateLimitStoreError and the decision is what the limiter applies:
// Allowed unless FailClosed, with the policy's Limit and Remaining 0.
func (l *RateLimiter) Allow(ctx context.Context) (ratelimit.Decision, error) {
	if l.opts.Cost != nil {
		return l.allowCost(ctx, Telemetry{})
	}
	var key string
	if l.opts.Key != nil {
		key = l.opts.Key(ctx)
	}
	return l.AllowKey(ctx, key)
}

// AllowKey is Allow for an explicit key. Keys longer than MaxKeyLength are
// shortened as documented there.
func (l *RateLimiter) AllowKey(ctx context.Context, key string) (ratelimit.Decision, error) {
	if l.store == nil {
		return ratelimit.Decision{}, l.unusable()
	}
	if len(key) > l.maxLen {
		key = shortenRateLimitKey(key, l.maxLen)
	}
	policy := l.livePolicy()
	d, err := l.store.Take(ctx, key, policy)
	if err != nil {
		return ratelimit.Decision{
			Allowed: !l.opts.FailClosed,
			Limit:   policy.Limit,
			Policy:  policy,
		}, &RateLimitStoreError{Policy: policy.Name, Err: err}
	}
	d.Policy = policy
	return d, nil
}

// unusable explains why a limiter not made by NewRateLimiter cannot run.
func (l *RateLimiter) unusable() error {
	if err := l.validate(); err != nil {
		return err
	}
	return &ConfigError{Field: "RateLimiter", Problem: "not made by NewRateLimiter"}
}

// Execute implements Strategy: it takes a permit and runs next, or returns
// a *RateLimitRejectedError without running it.
func (l *RateLimiter) Execute(ctx context.Context, tel Telemetry, next Next) error {
	if d, err := l.Take(ctx, tel); !d.Allowed {
		return err
	}
	return next(ctx)
}

// Take is Allow that reports through tel what Execute reports: for a
// caller that runs the limiter itself and needs the decision's numbers (an
// HTTP middleware setting the RateLimit fields), with the same events as
// the limiter in a pipeline. The execution may run only if d.Allowed. A
// rejection comes with a *RateLimitRejectedError and emits
// event.RateLimiterRejected (Duration the retry-after); a store failure
// comes with the *RateLimitStoreError and emits event.RateLimiterStoreError
// (Reason "fail-open" or "fail-closed"), d then being what FailClosed
// decides. A limiter not made by NewRateLimiter returns a *ConfigError.
func (l *RateLimiter) Take(ctx context.Context, tel Telemetry) (d ratelimit.Decision, err error) {
	if l.opts.Cost != nil {
		d, err = l.allowCost(ctx, tel)
	} else {
		d, err = l.AllowKey(ctx, callKey(ctx, tel, l.opts.Key))
	}
	if err != nil {
		var se *RateLimitStoreError
		if !errors.As(err, &se) {
			return d, err // unusable limiter
		}
		reason := "fail-open"
		if !d.Allowed {
			reason = "fail-closed"
		}
		tel.Emit(ctx, event.Event{Name: event.RateLimiterStoreError, Reason: reason, Err: err})
		return d, err
	}
	if !d.Allowed {
		rej := &RateLimitRejectedError{
			RetryAfter: d.RetryAfter,
			Limit:      d.Limit,
			Remaining:  d.Remaining,
			Reset:      d.Reset,
		}
		tel.Emit(ctx, event.Event{Name: event.RateLimiterRejected, Reason: event.ReasonRateLimited, Duration: d.RetryAfter, Err: rej})
		return d, rej
	}
	return d, nil
}

// shortenRateLimitKey returns key cut to its first max−22 bytes followed by
// 22 base64url characters of its SHA-256, exactly max bytes long. SHA-256
// (not a per-process seeded hash) so every instance sharing a store maps a
// key the same way, and so nobody can craft two keys that share a quota.
func shortenRateLimitKey(key string, max int) string {
	sum := sha256.Sum256([]byte(key))
	var tail [rateLimitKeyHashLen]byte
	base64.RawURLEncoding.Encode(tail[:], sum[:16])
	var b strings.Builder
	b.Grow(max)
	b.WriteString(key[:max-rateLimitKeyHashLen])
	b.Write(tail[:])
	return b.String()
}

// callKey returns key(ctx), or "" for a nil key: a panic of the key
// function is reported on tel as event.HookPanic (event.HookKey) and then goes
// on to the execution's caller unchanged.
func callKey(ctx context.Context, tel Telemetry, key func(context.Context) string) string {
	if key == nil {
		return ""
	}
	defer reportHookPanic(ctx, &tel, event.HookKey)
	return key(ctx)
}

// livePolicy is the policy in force: the one built, until Reconfigure.
// One atomic load; nothing allocated.
func (l *RateLimiter) livePolicy() ratelimit.Policy {
	if p := l.live.Load(); p != nil {
		return *p
	}
	return l.policy
}

// validateRateCost refuses a Cost function with a store that cannot take
// n permits atomically.
func validateRateCost(o *RateLimiterOptions) error {
	if o.Cost == nil || o.Store == nil {
		return nil
	}
	if _, ok := o.Store.(ratelimit.CostStore); !ok {
		return configErrorf("RateLimiterOptions.Cost", "needs a Store that takes n permits atomically (a ratelimit.CostStore); %T is not one", o.Store)
	}
	return nil
}

// allowCost is Allow and Take's decision under a Cost function: the key
// and the cost, each read once (a panic reported on tel), then n permits
// taken at once.
func (l *RateLimiter) allowCost(ctx context.Context, tel Telemetry) (ratelimit.Decision, error) {
	key := callKey(ctx, tel, l.opts.Key)
	n := callHook(ctx, &tel, event.HookCost, l.opts.Cost)
	return l.AllowKeyN(ctx, key, n)
}

// AllowKeyN is AllowKey for n permits, taken at once, all or none: n
// below 1 counts as 1, above the policy's limit as the limit. It needs a
// ratelimit.CostStore (as RateLimiterOptions.Cost does): with another
// store, n above 1 returns a *ConfigError and takes nothing.
func (l *RateLimiter) AllowKeyN(ctx context.Context, key string, n int) (ratelimit.Decision, error) {
	policy := l.livePolicy()
	if n = ratelimit.ClampCost(n, policy.Limit); n == 1 {
		return l.AllowKey(ctx, key)
	}
	if l.store == nil {
		return ratelimit.Decision{}, l.unusable()
	}
	cs, ok := l.store.(ratelimit.CostStore)
	if !ok {
		return ratelimit.Decision{}, &ConfigError{Field: "RateLimiterOptions.Store", Problem: "cannot take several permits at once: not a ratelimit.CostStore"}
	}
	if len(key) > l.maxLen {
		key = shortenRateLimitKey(key, l.maxLen)
	}
	d, err := cs.TakeN(ctx, key, policy, n)
	if err != nil {
		return ratelimit.Decision{
			Allowed: !l.opts.FailClosed,
			Limit:   policy.Limit,
			Policy:  policy,
		}, &RateLimitStoreError{Policy: policy.Name, Err: err}
	}
	d.Policy = policy
	return d, nil
}
