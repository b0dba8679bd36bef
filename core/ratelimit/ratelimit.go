package ratelimit

import (
	"time"

	"github.com/ylcnfrht/resilience/core/internal/config"
)

// Algorithm names how a rate limit counts permits. Its values are stable
// strings for configuration files; the empty string means FixedWindow.
type Algorithm string

const (
	// FixedWindow allows Limit permits in each window. A key's windows
	// start at its first request and follow back to back. Up to 2×Limit
	// permits can pass around a window boundary (the end of one window,
	// the start of the next).
	FixedWindow Algorithm = "fixed-window"
	// SlidingWindow approximates a window that slides with time: the count
	// of the previous fixed window, weighted by the share of it the
	// sliding window still covers, plus the count of the current one must
	// stay below Limit. The approximation assumes the previous window's
	// permits were spread evenly over it. It never admits more than Limit
	// in one of the key's fixed windows and damps the boundary burst.
	SlidingWindow Algorithm = "sliding-window"
	// TokenBucket keeps a bucket of Limit tokens that refills Limit tokens
	// per Window, evenly (one every Window/Limit). A full bucket absorbs a
	// burst of Limit; the sustained rate is Limit per Window.
	TokenBucket Algorithm = "token-bucket"
)

var algorithms = []Algorithm{FixedWindow, SlidingWindow, TokenBucket}

// ParseAlgorithm returns the algorithm named by s, ignoring case,
// surrounding space and '_' for '-'; "" is FixedWindow. Anything else is a
// *resilience.ConfigError that lists the accepted names.
func ParseAlgorithm(s string) (Algorithm, error) {
	v, ok := config.ParseEnum(s, FixedWindow, algorithms...)
	if !ok {
		return "", config.UnknownEnum("Policy.Algorithm", "algorithm", s, algorithms...)
	}
	return v, nil
}

// Policy is what a Store needs to decide: the limit of a rate limiter,
// without its key function or store. Name identifies the policy in a
// shared store and in the IETF RateLimit-Policy header. The zero value is
// invalid (no Limit or Window): a store refuses it with a
// *resilience.ConfigError.
type Policy struct {
	// Name is the limiter's name, or "default" when it has none.
	Name string
	// Algorithm is never empty in a policy made by a resilience.RateLimiter.
	Algorithm Algorithm
	// Limit is the number of permits per Window.
	Limit int
	// Window is the period the limit applies to.
	Window time.Duration
}

// algorithm returns the policy's algorithm with the empty default resolved
// (validate accepts only names ParseAlgorithm knows).
func (p Policy) algorithm() Algorithm {
	a, _ := ParseAlgorithm(string(p.Algorithm))
	return a
}

// validate checks a policy handed to a store directly.
func (p Policy) validate() error {
	if _, err := ParseAlgorithm(string(p.Algorithm)); err != nil {
		return err
	}
	if err := config.PositiveInt("Policy.Limit", p.Limit); err != nil {
		return err
	}
	return config.PositiveDuration("Policy.Window", p.Window)
}

// Decision is the outcome of one take: whether the permit was granted and
// the numbers for the RateLimit-* and Retry-After headers.
type Decision struct {
	// Allowed reports whether a permit was granted.
	Allowed bool
	// Limit is the number of permits per window.
	Limit int
	// Remaining is how many more permits the key would be granted right now.
	Remaining int
	// Reset is the time until the key's quota is whole again: the end of the
	// fixed window; for a sliding window, until the current window's permits
	// no longer weigh (the end of the next window); for a token bucket,
	// until the bucket is full.
	Reset time.Duration
	// RetryAfter is the least wait before a take could succeed; 0 when
	// allowed. Fixed window: the end of the window; sliding window: until
	// the weighted count drops below the limit; token bucket: the next token.
	RetryAfter time.Duration
	// Policy is the policy the decision was made under.
	Policy Policy
}
