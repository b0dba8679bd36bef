package ratelimit

import "context"

// CostStore is a Store that takes several permits in one atomic step, for
// requests that cost more than one (resilience.RateLimiterOptions.Cost: an
// export that counts as ten reads). MemoryStore implements it, and so does
// the Redis store of extensions/redis; a limiter with a Cost function
// refuses a Store that does not, at construction, since taking n permits
// one at a time would not be atomic.
type CostStore interface {
	Store
	// TakeN consumes n permits for key under policy, all or none,
	// atomically, and reports the decision: refused when fewer than n are
	// left (its Remaining says how many are, its RetryAfter when n will
	// be). n below 1 counts as 1, and n above policy.Limit as the limit:
	// a request may cost at most a whole window's (or bucket's) permits,
	// or it could never pass. TakeN with n 1 is Take.
	TakeN(ctx context.Context, key string, policy Policy, n int) (Decision, error)
}

// ClampCost returns the permits a take of cost n consumes under a limit:
// n, at least 1 and at most limit.
func ClampCost(n, limit int) int { return max(min(n, limit), 1) }

// TakeN implements CostStore: Take for n permits, all or none.
func (s *MemoryStore) TakeN(_ context.Context, key string, policy Policy, n int) (Decision, error) {
	return s.take(key, policy, int64(ClampCost(n, policy.Limit)))
}
