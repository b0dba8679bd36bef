package ratelimit

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/ylcnfrht/resilience/core/internal/config"
)

// rlPolicy is a valid policy for direct store tests.
var rlPolicy = Policy{Name: "p", Algorithm: FixedWindow, Limit: 1000, Window: time.Minute}

// rlStoreKeys lists every (policy, key) a store holds, checking the LRU
// list against the index on the way.
func rlStoreKeys(t *testing.T, s *MemoryStore) []memKey {
	t.Helper()
	var keys []memKey
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n := 0
		for j := sh.head; j >= 0; j = sh.entries[j].next {
			e := &sh.entries[j]
			if got, ok := sh.index[e.k]; !ok || got != j {
				t.Fatalf("shard %d: LRU entry %d (%q) not indexed", i, j, e.k.key)
			}
			keys = append(keys, e.k)
			n++
		}
		if n != len(sh.index) || int32(n) > sh.limit {
			t.Fatalf("shard %d: list %d, index %d, cap %d", i, n, len(sh.index), sh.limit)
		}
		sh.mu.Unlock()
	}
	return keys
}

// Invariant 6: memory is bounded by configuration, not by traffic. After
// 100·N distinct keys the store holds at most N, and the live heap does not
// grow with the number of keys seen.
func TestRateLimitStoreKeyCapBoundsMemory(t *testing.T) {
	const n = 1000
	s := NewMemoryStore(n)
	ctx := context.Background()
	flood := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := s.Take(ctx, "client-"+strconv.Itoa(i), rlPolicy); err != nil {
				t.Fatal(err)
			}
		}
	}
	flood(0, 10*n) // reach steady state: maps and slices at full size
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	flood(10*n, 100*n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := s.Len(); got > n {
		t.Fatalf("store holds %d keys, cap %d", got, n)
	}
	if got := len(rlStoreKeys(t, s)); got != n {
		t.Fatalf("store lists %d keys, want %d", got, n)
	}
	// 90 000 more keys retained would be several MB; a bounded store stays
	// within noise.
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("live heap change over 90 000 new keys: %d bytes", grew)
	if grew > 1<<20 {
		t.Fatalf("live heap grew by %d bytes over 90 000 new keys", grew)
	}
}

// Invariant: the key cap evicts idle keys first: a key that keeps being used
// keeps its state through a flood of one-off keys (its count is never
// reset), and the store is never cleared wholesale.
func TestRateLimitStoreHotKeySurvivesFlood(t *testing.T) {
	for _, maxKeys := range []int{2, 8, 600, 5000} { // 1, 1, 2 and 16 shards
		t.Run(strconv.Itoa(maxKeys), func(t *testing.T) {
			s := NewMemoryStore(maxKeys)
			ctx := context.Background()
			hot := func() Decision {
				d, err := s.Take(ctx, "hot", rlPolicy)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			uses := 0
			for i := range 100 * min(maxKeys, 1000) {
				if i%max(1, maxKeys/2) == 0 { // used before the flood can push it out of the LRU
					uses++
					if d := hot(); d.Remaining != rlPolicy.Limit-uses {
						t.Fatalf("after %d one-off keys: hot key remaining %d, want %d (evicted)", i, d.Remaining, rlPolicy.Limit-uses)
					}
				}
				if _, err := s.Take(ctx, "once-"+strconv.Itoa(i), rlPolicy); err != nil {
					t.Fatal(err)
				}
				if maxKeys <= 8 && s.Len() > maxKeys {
					t.Fatalf("len %d > cap %d", s.Len(), maxKeys)
				}
			}
			if s.Len() > maxKeys {
				t.Fatalf("len %d > cap %d", s.Len(), maxKeys)
			}
		})
	}
}

// Invariant: when the cap is reached, a key whose state is back to full
// (idle for its window) is evicted before a less recently used key that
// still holds a partial count — evicting it loses nothing.
func TestRateLimitStoreEvictsFullStateFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewMemoryStore(2)
		ctx := context.Background()
		long := Policy{Name: "long", Limit: 10, Window: time.Hour}
		short := Policy{Name: "short", Limit: 10, Window: time.Second}
		if _, err := s.Take(ctx, "a", long); err != nil { // least recently used
			t.Fatal(err)
		}
		if _, err := s.Take(ctx, "b", short); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // b is back to full, a is not
		if _, err := s.Take(ctx, "c", short); err != nil {
			t.Fatal(err)
		}
		keys := rlStoreKeys(t, s)
		want := []memKey{{"short", "c"}, {"long", "a"}}
		if len(keys) != 2 || keys[0] != want[0] || keys[1] != want[1] {
			t.Fatalf("store holds %v, want %v", keys, want)
		}
		if d, _ := s.Take(ctx, "a", long); d.Remaining != 8 {
			t.Fatalf("a lost its count: remaining %d, want 8", d.Remaining)
		}
		// No key is idle now: the least recently used (c) goes.
		if _, err := s.Take(ctx, "d", short); err != nil {
			t.Fatal(err)
		}
		keys = rlStoreKeys(t, s)
		want = []memKey{{"short", "d"}, {"long", "a"}}
		if len(keys) != 2 || keys[0] != want[0] || keys[1] != want[1] {
			t.Fatalf("store holds %v, want %v", keys, want)
		}
	})
}

// Invariant: the per-shard caps add up to MaxKeys exactly, whatever the
// shard count.
func TestRateLimitStoreShardCapsSumToMaxKeys(t *testing.T) {
	for _, n := range []int{1, 2, 255, 511, 512, 1000, 10_000, 16_385, 1 << 20} {
		s := NewMemoryStore(n)
		sum := 0
		for i := range s.shards {
			if s.shards[i].limit < 1 {
				t.Fatalf("maxKeys %d: shard %d has cap %d", n, i, s.shards[i].limit)
			}
			sum += int(s.shards[i].limit)
		}
		if sum != n || s.maxKeysCap() != n {
			t.Fatalf("maxKeys %d: shard caps sum to %d, MaxKeys %d", n, sum, s.maxKeysCap())
		}
	}
	if got := NewMemoryStore(0).maxKeysCap(); got != defaultMaxKeys {
		t.Fatalf("default cap %d", got)
	}
	if got := NewMemoryStore(-5).maxKeysCap(); got != defaultMaxKeys {
		t.Fatalf("negative cap gave %d", got)
	}
}

// Invariant: the zero MemoryStore is usable, with the default cap.
func TestRateLimitStoreZeroValue(t *testing.T) {
	var s MemoryStore
	d, err := s.Take(context.Background(), "k", rlPolicy)
	if err != nil || !d.Allowed || d.Remaining != rlPolicy.Limit-1 || d.Policy != rlPolicy {
		t.Fatalf("zero store: %+v, %v", d, err)
	}
	if s.maxKeysCap() != defaultMaxKeys || s.Len() != 1 {
		t.Fatalf("zero store: cap %d len %d", s.maxKeysCap(), s.Len())
	}
}

// Invariant: an invalid policy handed to the store directly is a
// *config.Error (resilience.ConfigError) naming the Policy field, and
// stores nothing.
func TestRateLimitStoreInvalidPolicy(t *testing.T) {
	s := NewMemoryStore(10)
	for _, tc := range []struct {
		p     Policy
		field string
	}{
		{Policy{Limit: 0, Window: time.Second}, "Policy.Limit"},
		{Policy{Limit: 1, Window: 0}, "Policy.Window"},
		{Policy{Algorithm: "leaky", Limit: 1, Window: time.Second}, "Policy.Algorithm"},
	} {
		_, err := s.Take(context.Background(), "k", tc.p)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Fatalf("policy %+v: err %v, want field %s", tc.p, err, tc.field)
		}
	}
	if s.Len() != 0 {
		t.Fatalf("invalid policies stored %d keys", s.Len())
	}
}

// Invariant: one store keeps policies apart (same key, different policy
// names count separately), and a key whose policy changes algorithm starts
// afresh instead of misreading the old state.
func TestRateLimitStorePoliciesAreSeparate(t *testing.T) {
	s := NewMemoryStore(10)
	ctx := context.Background()
	a := Policy{Name: "a", Limit: 1, Window: time.Hour}
	b := Policy{Name: "b", Limit: 1, Window: time.Hour}
	if d, _ := s.Take(ctx, "k", a); !d.Allowed {
		t.Fatal("a refused")
	}
	if d, _ := s.Take(ctx, "k", b); !d.Allowed {
		t.Fatal("b refused: shares a's count")
	}
	if d, _ := s.Take(ctx, "k", a); d.Allowed {
		t.Fatal("a admitted twice")
	}
	a.Algorithm = TokenBucket
	if d, _ := s.Take(ctx, "k", a); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("algorithm change: %+v", d)
	}
}

// Invariant: the store never pins the string a key was cut from.
func TestRateLimitStoreCopiesNewKeys(t *testing.T) {
	s := NewMemoryStore(10)
	big := string(make([]byte, 1<<20))
	if _, err := s.Take(context.Background(), big[:8], rlPolicy); err != nil {
		t.Fatal(err)
	}
	k := rlStoreKeys(t, s)[0].key
	if k != big[:8] || unsafe.StringData(k) == unsafe.StringData(big) {
		t.Fatal("stored key shares memory with the caller's larger string")
	}
}

// Invariant (concurrency): many goroutines on few keys never get more than
// PermitLimit per key per window; with fixed window and token bucket they
// get exactly PermitLimit (nothing lost either). Rounds run at fake-clock
// instants one Window apart; goroutines run in parallel under -race.
func TestRateLimitConcurrentAdmittedAtMostLimit(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket} {
		t.Run(string(alg), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const (
					limit      = 25
					keys       = 3
					goroutines = 12
					rounds     = 4
					attempts   = 20 // per goroutine per round: 80 per key per round > limit
				)
				l := rlNew(Policy{Algorithm: alg, Limit: limit, Window: time.Second})
				var mu sync.Mutex
				admitted := make([][keys]int, rounds)
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						key := "k" + strconv.Itoa(g%keys)
						for r := range rounds {
							n := 0
							for range attempts {
								d, err := l.AllowKey(context.Background(), key)
								if err != nil {
									t.Error(err)
									return
								}
								if d.Allowed {
									n++
								}
							}
							mu.Lock()
							admitted[r][g%keys] += n
							mu.Unlock()
							time.Sleep(time.Second)
						}
					})
				}
				wg.Wait()
				for r := range rounds {
					for k := range keys {
						got := admitted[r][k]
						if got > limit {
							t.Fatalf("round %d key %d: admitted %d > limit %d", r, k, got, limit)
						}
						if alg != SlidingWindow && got != limit {
							t.Fatalf("round %d key %d: admitted %d, want exactly %d", r, k, got, limit)
						}
					}
				}
			})
		})
	}
}
