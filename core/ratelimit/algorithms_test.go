package ratelimit

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/internal/config"
	"pgregory.net/rapid"
)

// rlWant is the part of a decision the exact tests check.
type rlWant struct {
	allowed    bool
	remaining  int
	reset      time.Duration
	retryAfter time.Duration
}

// rlLimiter takes permits from a memory store under one policy, as a
// rate limiter does.
type rlLimiter struct {
	store  *MemoryStore
	policy Policy
}

// AllowKey takes one permit for key.
func (l rlLimiter) AllowKey(ctx context.Context, key string) (Decision, error) {
	return l.store.Take(ctx, key, l.policy)
}

// rlExpect takes one permit for key and compares the decision with w.
func rlExpect(t *testing.T, l rlLimiter, key string, step string, w rlWant) {
	t.Helper()
	d, err := l.AllowKey(context.Background(), key)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	got := rlWant{d.Allowed, d.Remaining, d.Reset, d.RetryAfter}
	if got != w {
		t.Fatalf("%s: got %+v, want %+v", step, got, w)
	}
	if d.Limit != l.policy.Limit || d.Policy != l.policy {
		t.Fatalf("%s: Limit %d, policy %+v; want %+v", step, d.Limit, d.Policy, l.policy)
	}
}

// rlNew returns a limiter on a new memory store (made now, inside a
// synctest bubble when called there).
func rlNew(p Policy) rlLimiter {
	if p.Name == "" {
		p.Name = "default"
	}
	return rlLimiter{store: NewMemoryStore(0), policy: p}
}

// Invariant: a fixed window grants exactly PermitLimit per window; reset and
// retry-after are the time left in the window, to the nanosecond.
func TestFixedWindowExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := rlNew(Policy{Limit: 3, Window: 10 * time.Second})
		s := 10 * time.Second
		rlExpect(t, l, "k", "t=0 #1", rlWant{true, 2, s, 0})
		rlExpect(t, l, "k", "t=0 #2", rlWant{true, 1, s, 0})
		rlExpect(t, l, "k", "t=0 #3", rlWant{true, 0, s, 0})
		rlExpect(t, l, "k", "t=0 #4", rlWant{false, 0, s, s})
		time.Sleep(4 * time.Second)
		rlExpect(t, l, "k", "t=4s", rlWant{false, 0, 6 * time.Second, 6 * time.Second})
		time.Sleep(6*time.Second - 1)
		rlExpect(t, l, "k", "t=10s-1ns", rlWant{false, 0, 1, 1})
		time.Sleep(time.Nanosecond)
		rlExpect(t, l, "k", "t=10s", rlWant{true, 2, s, 0})
		// Windows follow back to back from the key's first request: at 35s
		// the window is [30s, 40s).
		time.Sleep(25 * time.Second)
		rlExpect(t, l, "k", "t=35s", rlWant{true, 2, 5 * time.Second, 0})
	})
}

// Invariant: the sliding window estimate prev·(W−e)/W + cur admits exactly
// while it stays below the limit; retry-after is the least wait that
// admits, reset the time until no permit weighs any more.
func TestSlidingWindowExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := rlNew(Policy{Algorithm: SlidingWindow, Limit: 4, Window: 10 * time.Second})
		ms := time.Millisecond
		for i, rem := range []int{3, 2, 1, 0} {
			rlExpect(t, l, "k", "t=0 #"+string(rune('1'+i)), rlWant{true, rem, 20 * time.Second, 0})
		}
		// Full current window: wait into the next one until 4·(10−e)/10 <= 3,
		// that is e = 2.5s: 10s + 2.5s.
		rlExpect(t, l, "k", "t=0 #5", rlWant{false, 0, 20 * time.Second, 12500 * ms})
		time.Sleep(10 * time.Second)
		rlExpect(t, l, "k", "t=10s", rlWant{false, 0, 10 * time.Second, 2500 * ms})
		time.Sleep(2500*ms - 1)
		rlExpect(t, l, "k", "t=12.5s-1ns", rlWant{false, 0, 7500*ms + 1, 1})
		time.Sleep(time.Nanosecond)
		// 4·0.75 + 1 = 4 <= 4; nothing left at this instant.
		rlExpect(t, l, "k", "t=12.5s", rlWant{true, 0, 17500 * ms, 0})
		time.Sleep(2500 * ms)
		// 4·0.5 + 2 = 4.
		rlExpect(t, l, "k", "t=15s", rlWant{true, 0, 15 * time.Second, 0})
		// 4·(10−e)/10 + 2 <= 3 from e = 7.5s.
		rlExpect(t, l, "k", "t=15s denied", rlWant{false, 0, 15 * time.Second, 2500 * ms})
		time.Sleep(2500 * ms)
		rlExpect(t, l, "k", "t=17.5s", rlWant{true, 0, 12500 * ms, 0})
		// Two windows later nothing weighs: the whole limit again.
		time.Sleep(12500 * ms)
		rlExpect(t, l, "k", "t=30s", rlWant{true, 3, 20 * time.Second, 0})
	})
}

// Invariant: a token bucket holds PermitLimit tokens and refills PermitLimit
// per Window evenly; retry-after is the next token, reset the time to full.
func TestTokenBucketExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := rlNew(Policy{Algorithm: TokenBucket, Limit: 4, Window: 10 * time.Second})
		ms := time.Millisecond
		rlExpect(t, l, "k", "#1", rlWant{true, 3, 2500 * ms, 0})
		rlExpect(t, l, "k", "#2", rlWant{true, 2, 5000 * ms, 0})
		rlExpect(t, l, "k", "#3", rlWant{true, 1, 7500 * ms, 0})
		rlExpect(t, l, "k", "#4", rlWant{true, 0, 10 * time.Second, 0})
		rlExpect(t, l, "k", "#5", rlWant{false, 0, 10 * time.Second, 2500 * ms})
		time.Sleep(time.Second)
		rlExpect(t, l, "k", "t=1s", rlWant{false, 0, 9 * time.Second, 1500 * ms})
		time.Sleep(1500 * ms)
		rlExpect(t, l, "k", "t=2.5s", rlWant{true, 0, 10 * time.Second, 0})
		time.Sleep(100 * time.Second)
		rlExpect(t, l, "k", "t=102.5s", rlWant{true, 3, 2500 * ms, 0})
	})
}

// Invariant: tokens accrue exactly even when Window/PermitLimit is not a
// whole number of nanoseconds: the first token after emptying arrives at
// ⌈Window/PermitLimit⌉, never earlier.
func TestTokenBucketFractionalInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := rlNew(Policy{Algorithm: TokenBucket, Limit: 3, Window: time.Second})
		for range 3 {
			if d, _ := l.AllowKey(context.Background(), "k"); !d.Allowed {
				t.Fatal("a full bucket refused")
			}
		}
		rlExpect(t, l, "k", "empty", rlWant{false, 0, time.Second, 333_333_334})
		time.Sleep(333_333_333)
		rlExpect(t, l, "k", "1ns early", rlWant{false, 0, 666_666_667, 1})
		time.Sleep(time.Nanosecond)
		// Emptied again at 333 333 334ns; tokens keep arriving on the grid
		// ⌈i·Window/3⌉ from the first emptying, so the bucket is full with
		// token 4 at ⌈4·Window/3⌉ = 1 333 333 334ns, one Window from now.
		rlExpect(t, l, "k", "on time", rlWant{true, 0, time.Second, 0})
		// 1ns before token 4: tokens 2 and 3 are in; taking one leaves one,
		// and full is now token 5, at ⌈5·Window/3⌉ = 1 666 666 667ns.
		time.Sleep(time.Second - 1)
		rlExpect(t, l, "k", "1ns before full", rlWant{true, 1, 333_333_334, 0})
		time.Sleep(time.Second)
		rlExpect(t, l, "k", "full", rlWant{true, 2, 333_333_334, 0})
	})
}

// rlBubbleTB hides *testing.T from rapid, which would otherwise call
// t.Deadline, forbidden inside a synctest bubble.
type rlBubbleTB struct{ *testing.T }

// Invariant (property): the admitted count never exceeds the limit — per
// window of the key (fixed and sliding window) and, for a token bucket, in
// any interval of length d never more than PermitLimit + ⌊d·PermitLimit/Window⌋
// (the bucket plus what refills). Also, every refusal's retry-after is exact
// (1ns sooner is refused, on time is admitted) and after Reset the quota is
// whole again. Time is the synctest bubble's fake clock.
func TestRateLimitPropertyAdmittedNeverExceedsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(rlBubbleTB{t}, func(rt *rapid.T) {
			alg := rapid.SampledFrom([]Algorithm{FixedWindow, SlidingWindow, TokenBucket}).Draw(rt, "alg")
			limit := rapid.IntRange(1, 6).Draw(rt, "limit")
			window := time.Duration(rapid.Int64Range(1, 1000).Draw(rt, "window_ms")) * time.Millisecond
			if rapid.Bool().Draw(rt, "odd_window") {
				window += time.Duration(rapid.Int64Range(1, 999).Draw(rt, "window_extra_ns"))
			}
			l := rlNew(Policy{Algorithm: alg, Limit: limit, Window: window})
			start := time.Now()
			var admitted []time.Duration
			take := func() Decision {
				d, err := l.AllowKey(context.Background(), "k")
				if err != nil {
					rt.Fatal(err)
				}
				if d.Allowed {
					admitted = append(admitted, time.Since(start))
				}
				return d
			}
			steps := rapid.IntRange(1, 60).Draw(rt, "steps")
			for range steps {
				gap := time.Duration(rapid.Int64Range(0, 3*int64(window)/2).Draw(rt, "gap"))
				if rapid.IntRange(0, 3).Draw(rt, "burst") == 0 {
					gap = 0
				}
				time.Sleep(gap)
				d := take()
				switch {
				case !d.Allowed && rapid.IntRange(0, 3).Draw(rt, "check_retry") == 0:
					if d.RetryAfter <= 0 {
						rt.Fatalf("refused with retry-after %v", d.RetryAfter)
					}
					time.Sleep(d.RetryAfter - 1)
					if take().Allowed {
						rt.Fatalf("%s admitted 1ns before retry-after %v", alg, d.RetryAfter)
					}
					time.Sleep(time.Nanosecond)
					if !take().Allowed {
						rt.Fatalf("%s refused at retry-after %v", alg, d.RetryAfter)
					}
				case rapid.IntRange(0, 7).Draw(rt, "check_reset") == 0:
					time.Sleep(d.Reset)
					if d2 := take(); !d2.Allowed || d2.Remaining != limit-1 {
						rt.Fatalf("%s after reset %v: %+v, want whole quota", alg, d.Reset, d2)
					}
				}
			}
			if alg == TokenBucket {
				for i := range admitted {
					for j := i; j < len(admitted); j++ {
						span := admitted[j] - admitted[i]
						bound := limit + int(int64(span)*int64(limit)/int64(window))
						if j-i+1 > bound {
							rt.Fatalf("token bucket admitted %d in %v (bound %d): %v", j-i+1, span, bound, admitted)
						}
					}
				}
				return
			}
			// The key's windows start at its first take, always admitted.
			perWindow := map[int64]int{}
			for _, at := range admitted {
				w := int64(at-admitted[0]) / int64(window)
				perWindow[w]++
				if perWindow[w] > limit {
					rt.Fatalf("%s admitted %d in window %d (limit %d): %v", alg, perWindow[w], w, limit, admitted)
				}
			}
		})
	})
}

// Invariant: the 128-bit helpers give exact results where a 64-bit product
// would overflow (a large limit over a 100-year window).
func TestRateLimitMathLargeValues(t *testing.T) {
	w := int64(config.MaxDuration)
	limit := int64(1) << 40
	if got := ceilMulDiv(limit, w, w); got != limit {
		t.Fatalf("ceilMulDiv = %d, want %d", got, limit)
	}
	if got := floorMulDiv(limit-1, w, limit); got >= w || got < w-w/limit-1 {
		t.Fatalf("floorMulDiv = %d out of range", got)
	}
	s := newBucketState(0, limit)
	r := takeTokenBucket(&s, 0, limit, w, 1)
	if !r.allowed || r.remaining != limit-1 || r.reset != ceilDiv(w, limit) {
		t.Fatalf("token bucket large: %+v", r)
	}
	s = newWindowState(0)
	sr := takeSlidingWindow(&s, 0, limit, w, 1)
	if !sr.allowed || sr.remaining != limit-1 || sr.reset != 2*w {
		t.Fatalf("sliding large: %+v", sr)
	}
	if ceilDiv(w, 1<<62) != 1 || ceilDiv(0, 3) != 0 || ceilDiv(7, 2) != 4 {
		t.Fatal("ceilDiv")
	}
}

// Invariant: a clock read older than the state (taken before another
// goroutine advanced it) neither rewinds the state nor reports negative
// durations.
func TestRateLimitStaleClockRead(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket} {
		s := initialState(alg, 100, 2)
		var r rlResult
		switch alg {
		case TokenBucket:
			r = takeTokenBucket(&s, 50, 2, 10, 1)
		case SlidingWindow:
			r = takeSlidingWindow(&s, 50, 2, 10, 1)
		default:
			r = takeFixedWindow(&s, 50, 2, 10, 1)
		}
		if !r.allowed || r.reset < 0 || r.reset > 20 || s.a != 100 {
			t.Fatalf("%s: %+v state %+v", alg, r, s)
		}
	}
}
