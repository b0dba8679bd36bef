package ratelimit

import (
	"math/bits"
	"time"

	"github.com/ylcnfrht/resilience/core/internal/config"
)

// This file holds the arithmetic of the three rate-limit algorithms. It is
// pure: every function takes the current time as an argument and works on a
// small state value, so the in-memory store (and tests) drive it with any
// clock. Times are nanoseconds on the store's monotonic clock.
//
// All three algorithms keep their state in three int64 words (rlState) so a
// store entry has the same size whatever the algorithm.
//
// Products of a count and a window can exceed int64 (a limit of 10⁶ over a
// 100-year window), so they are computed in 128 bits with math/bits.

// rlState is the per-key state. Its fields mean:
//
//	fixed and sliding window: a = start of the current window,
//	                          b = permits taken in the current window,
//	                          c = permits taken in the previous window (sliding only)
//	token bucket:             a = time of the last refill,
//	                          b = whole tokens in the bucket,
//	                          c = progress towards the next token, in units
//	                              of 1/limit ns (always < window)
type rlState struct {
	a, b, c int64
}

// rlResult is the outcome of one take, without the policy.
type rlResult struct {
	allowed    bool
	remaining  int64
	reset      int64 // ns until the key is fully replenished
	retryAfter int64 // ns until a take could succeed; 0 when allowed
}

// newWindowState returns the state of a key first seen at now. A key's
// windows start at its first request and then follow back to back, so keys
// do not share boundaries and their quotas do not all reset at one instant.
func newWindowState(now int64) rlState { return rlState{a: now} }

// newBucketState returns a full bucket at now.
func newBucketState(now, limit int64) rlState { return rlState{a: now, b: limit} }

// rollWindow advances a fixed or sliding window state to the window that
// contains now. A now earlier than the window start (a clock read before
// another goroutine advanced the state) counts as the window start.
func rollWindow(s *rlState, now, window int64) (elapsed int64) {
	elapsed = now - s.a
	if elapsed < 0 {
		return 0
	}
	if elapsed < window {
		return elapsed
	}
	k := elapsed / window
	if k == 1 {
		s.c = s.b
	} else {
		s.c = 0
	}
	s.b = 0
	s.a += k * window
	return elapsed - k*window
}

// takeFixedWindow counts n permits (1 <= n <= limit) against a fixed
// window: at most limit permits in each window. Retry-after and reset are
// both the time left in the current window.
func takeFixedWindow(s *rlState, now, limit, window, n int64) rlResult {
	e := rollWindow(s, now, window)
	left := window - e
	if s.b+n > limit {
		return rlResult{remaining: max(limit-s.b, 0), reset: left, retryAfter: left}
	}
	s.b += n
	return rlResult{allowed: true, remaining: limit - s.b, reset: left}
}

// takeSlidingWindow counts one permit against a sliding window, estimated
// from two fixed windows: the count of the previous window weighted by the
// share of it that still overlaps the sliding window ending now, plus the
// count of the current window,
//
//	estimate = prev·(window−e)/window + cur    (e = time into the current window)
//
// and n permits (1 <= n <= limit) are granted when estimate+n <= limit. The estimate assumes the
// previous window's permits were spread evenly over it; it never lets more
// than limit permits into one of the key's fixed windows, and it smooths
// the boundary burst a fixed window allows.
func takeSlidingWindow(s *rlState, now, limit, window, n int64) rlResult {
	e := rollWindow(s, now, window)
	prev, cur := s.c, s.b
	if slidingAdmits(prev, cur, e, limit, window, n) {
		s.b += n
		cur += n
		return rlResult{
			allowed:   true,
			remaining: slidingRemaining(prev, cur, e, limit, window),
			reset:     slidingReset(prev, cur, e, window),
		}
	}
	return rlResult{
		remaining:  slidingRemaining(prev, cur, e, limit, window),
		reset:      slidingReset(prev, cur, e, window),
		retryAfter: slidingRetryAfter(prev, cur, e, limit, window, n),
	}
}

// slidingAdmits reports prev·(window−e) + (cur+n)·window <= limit·window,
// that is prev·(window−e) <= (limit−n−cur)·window.
func slidingAdmits(prev, cur, e, limit, window, n int64) bool {
	room := limit - n - cur
	if room < 0 {
		return false
	}
	lh, ll := bits.Mul64(uint64(prev), uint64(window-e))
	rh, rl := bits.Mul64(uint64(room), uint64(window))
	return lh < rh || (lh == rh && ll <= rl)
}

// slidingRemaining is how many more permits would be granted at this same
// instant: limit − cur − ⌈prev·(window−e)/window⌉.
func slidingRemaining(prev, cur, e, limit, window int64) int64 {
	r := limit - cur - ceilMulDiv(prev, window-e, window)
	if r < 0 {
		return 0
	}
	return r
}

// slidingReset is the time until the estimate is zero: the current window's
// permits stop counting at the end of the next window, the previous
// window's at the end of this one.
func slidingReset(prev, cur, e, window int64) int64 {
	switch {
	case cur > 0:
		return 2*window - e
	case prev > 0:
		return window - e
	}
	return 0
}

// slidingRetryAfter is the least wait after which slidingAdmits holds for n
// permits. Within the current window the estimate falls as e grows; the
// first admitting e is window − ⌊(limit−n−cur)·window/prev⌋. When the
// current window has no room for n the wait runs into the next one, where
// the current window becomes prev.
func slidingRetryAfter(prev, cur, e, limit, window, n int64) int64 {
	if cur+n <= limit {
		// cur+n <= limit and the estimate is too high, so prev > 0.
		need := window - floorMulDiv(limit-n-cur, window, prev)
		return need - e
	}
	// Next window: prev' = cur, cur' = 0, e' = window − ⌊(limit−n)·window/cur⌋
	// (cur > limit−n >= 0).
	return (window - e) + window - floorMulDiv(limit-n, window, cur)
}

// takeTokenBucket takes n tokens (1 <= n <= limit) from a bucket of
// capacity limit that refills limit tokens per window, one every
// window/limit, evenly. Tokens accrue exactly: the i-th token after the
// bucket was empty at t arrives at t + ⌈i·window/limit⌉. Retry-after is the
// time until the bucket holds n tokens, reset the time until it is full.
func takeTokenBucket(s *rlState, now, limit, window, n int64) rlResult {
	refillBucket(s, now, limit, window)
	if s.b >= n {
		s.b -= n
		return rlResult{allowed: true, remaining: s.b, reset: bucketReset(s, limit, window)}
	}
	retry := ceilDiv(window-s.c, limit) // the next token
	if n-s.b > 1 {
		retry = bucketWait(s, n-s.b, limit, window)
	}
	return rlResult{
		remaining:  s.b,
		reset:      bucketReset(s, limit, window),
		retryAfter: retry,
	}
}

// refillBucket adds the tokens that accrued since the last refill. A bucket
// that reaches capacity drops its partial progress: a full bucket gains
// nothing by waiting.
func refillBucket(s *rlState, now, limit, window int64) {
	elapsed := now - s.a
	if elapsed <= 0 {
		return // no time passed, or a clock read older than the state
	}
	s.a = now
	if s.b > limit { // the limit was lowered under a shared store
		s.b = limit
	}
	if s.b == limit {
		s.c = 0
		return
	}
	if elapsed >= window {
		s.b, s.c = limit, 0
		return
	}
	// (elapsed·limit + c) / window, in 128 bits; elapsed < window and
	// c < window keep the quotient below limit+1, so it fits.
	hi, lo := bits.Mul64(uint64(elapsed), uint64(limit))
	lo, carry := bits.Add64(lo, uint64(s.c), 0)
	hi += carry
	q, r := bits.Div64(hi, lo, uint64(window))
	if int64(q) >= limit-s.b {
		s.b, s.c = limit, 0
		return
	}
	s.b += int64(q)
	s.c = int64(r)
}

// bucketReset is the time until the bucket holds limit tokens:
// ⌈((limit−b)·window − c)/limit⌉.
func bucketReset(s *rlState, limit, window int64) int64 {
	missing := limit - s.b
	if missing <= 0 {
		return 0
	}
	return bucketWait(s, missing, limit, window)
}

// bucketWait is the time until the bucket has gained missing (>= 1) more
// tokens: ⌈(missing·window − c)/limit⌉.
func bucketWait(s *rlState, missing, limit, window int64) int64 {
	hi, lo := bits.Mul64(uint64(missing), uint64(window))
	lo, borrow := bits.Sub64(lo, uint64(s.c), 0)
	hi -= borrow
	q, r := bits.Div64(hi, lo, uint64(limit))
	if r != 0 {
		q++
	}
	return int64(q)
}

// ceilMulDiv returns ⌈a·b/c⌉ for a, b >= 0, c > 0 and a·b/c < 2⁶³.
func ceilMulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	return int64(q)
}

// floorMulDiv returns ⌊a·b/c⌋ for a, b >= 0, c > 0 and a·b/c < 2⁶³.
func floorMulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// ceilDiv returns ⌈a/b⌉ for a >= 0, b > 0, without the overflow of a+b−1.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// rlIdleSpan is how long a key must go untouched before its state is back
// to "full" whatever it was: one window for fixed window and token bucket,
// two for sliding window (the current window's permits weigh on the next).
func rlIdleSpan(alg Algorithm, window time.Duration) int64 {
	if alg == SlidingWindow {
		if window > config.MaxDuration { // cannot happen after validation; keep 2·window in range
			return int64(window)
		}
		return 2 * int64(window)
	}
	return int64(window)
}
