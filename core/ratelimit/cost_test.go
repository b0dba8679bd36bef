package ratelimit

import (
	"context"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// takeN runs one algorithm's take of n permits on s.
func takeN(alg Algorithm, s *rlState, now, limit, window, n int64) rlResult {
	switch alg {
	case TokenBucket:
		return takeTokenBucket(s, now, limit, window, n)
	case SlidingWindow:
		return takeSlidingWindow(s, now, limit, window, n)
	}
	return takeFixedWindow(s, now, limit, window, n)
}

// TestTakeNIsNSingleTakes checks, for every algorithm under random
// sequences of takes of random cost, that a take of n is n takes of one at
// the same instant, all or none: it is admitted exactly when n single
// takes would all be, and then leaves the same state; a refused take
// consumes nothing; and its retry-after is exact: n permits pass at that
// wait, not one nanosecond sooner.
func TestTakeNIsNSingleTakes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		alg := rapid.SampledFrom(algorithms).Draw(t, "alg")
		limit := int64(rapid.IntRange(1, 12).Draw(t, "limit"))
		window := int64(rapid.IntRange(1, 1000).Draw(t, "window"))
		now := int64(rapid.IntRange(0, 1000).Draw(t, "start"))
		s := initialState(alg, now, limit)
		for range rapid.IntRange(1, 30).Draw(t, "takes") {
			now += int64(rapid.IntRange(0, int(2*window)).Draw(t, "advance"))
			n := int64(rapid.IntRange(1, int(limit)).Draw(t, "n"))
			singles := s
			ok := true
			for range n {
				if !takeN(alg, &singles, now, limit, window, 1).allowed {
					ok = false
					break
				}
			}
			before := s
			r := takeN(alg, &s, now, limit, window, n)
			if r.allowed != ok {
				t.Fatalf("%s take of %d at %d: allowed %v, %d single takes: %v", alg, n, now, r.allowed, n, ok)
			}
			if r.allowed {
				if s != singles {
					t.Fatalf("%s take of %d: state %+v, after %d single takes %+v", alg, n, s, n, singles)
				}
				continue
			}
			// Refused: nothing consumed (the same take again at the same
			// instant decides the same and leaves the same state).
			again := s
			if takeN(alg, &again, now, limit, window, n).allowed || again != s {
				t.Fatalf("%s: a refused take of %d changed its key: %+v then %+v", alg, n, before, s)
			}
			if r.retryAfter <= 0 {
				t.Fatalf("%s: refused take of %d with retry-after %d", alg, n, r.retryAfter)
			}
			at := s
			if !takeN(alg, &at, now+r.retryAfter, limit, window, n).allowed {
				t.Fatalf("%s: take of %d refused at its retry-after %d (state %+v)", alg, n, r.retryAfter, s)
			}
			sooner := s
			if takeN(alg, &sooner, now+r.retryAfter-1, limit, window, n).allowed {
				t.Fatalf("%s: take of %d admitted 1 ns before its retry-after %d (state %+v)", alg, n, r.retryAfter, s)
			}
		}
	})
}

// TestMemoryStoreTakeN: n permits at once, clamped to the limit, all or
// none.
func TestMemoryStoreTakeN(t *testing.T) {
	s := NewMemoryStore(0)
	p := Policy{Name: "p", Algorithm: FixedWindow, Limit: 10, Window: time.Hour}
	ctx := context.Background()
	d, err := s.TakeN(ctx, "k", p, 7)
	if err != nil || !d.Allowed || d.Remaining != 3 {
		t.Fatalf("TakeN(7) = %+v, %v; want allowed, 3 left", d, err)
	}
	d, _ = s.TakeN(ctx, "k", p, 4)
	if d.Allowed || d.Remaining != 3 || d.RetryAfter <= 0 {
		t.Fatalf("TakeN(4) with 3 left = %+v; want refused, 3 left, a retry-after", d)
	}
	if d, _ = s.TakeN(ctx, "k", p, 0); !d.Allowed || d.Remaining != 2 {
		t.Fatalf("TakeN(0) = %+v; want one permit taken", d)
	}
	if d, _ = s.TakeN(ctx, "other", p, 50); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("TakeN(50) under a limit of 10 = %+v; want the whole limit taken", d)
	}
	var _ CostStore = s
}
