package ratelimit

import (
	"context"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"time"
)

// Store keeps the counters of rate limiters. The in-memory store
// (MemoryStore) is the default; a shared store (Redis, say) lets a fleet of
// instances enforce one limit per key together.
//
// Implementations must be safe for concurrent use. Take must be atomic per
// (policy name, key): concurrent takes for one key must never grant more
// permits than the policy allows. A store keeps the state of different
// policy names apart, so limiters that share a store need distinct policy
// names. An error means no decision was made; the limiter then fails open
// or closed as its options say (resilience.RateLimiterOptions.FailClosed).
// A nil resilience.RateLimiterOptions.Store means a new MemoryStore.
type Store interface {
	// Take consumes one permit for key under policy, atomically, and reports
	// the decision. A refused take consumes nothing.
	Take(ctx context.Context, key string, policy Policy) (Decision, error)
}

const (
	// defaultMaxKeys is the key cap of the in-memory store when none
	// is configured.
	defaultMaxKeys = 10_000
	// maxKeyCap bounds the key cap so entry indices fit in int32.
	maxKeyCap = math.MaxInt32
	// memShardMinKeys is the least number of keys per shard: below it, one
	// shard's LRU would be too short to protect a hot key from a flood.
	memShardMinKeys = 256
	// memMaxShards caps the number of shards (and so of mutexes).
	memMaxShards = 64
	// memEvictScan is how many of the least recently used entries eviction
	// inspects for one whose state is already back to full.
	memEvictScan = 8
)

// MemoryStore is a Store that keeps counters in process memory, bounded
// by a key cap however many distinct keys arrive.
//
// Keys are spread over up to 64 shards, each with its own mutex, map and
// least-recently-used list; a Take locks one shard and, for a key already
// present, allocates nothing. Each shard holds at most its share of the key
// cap (the shares add up to the cap exactly). When a new key arrives at a
// full shard, one key is evicted: among the 8 least recently used keys of
// that shard, the least recently used one that has been idle long enough
// for its state to be back to full (one window; two for sliding window),
// whose eviction loses nothing; if none has, the least recently used key.
// So a key that keeps being used is never evicted by a flood of one-off
// keys, and the store is never cleared wholesale. An evicted key that
// returns starts afresh, with a full quota: under a flood larger than the
// cap, idle keys lose their state, busy keys keep theirs.
//
// Memory is bounded by the key cap and by the key length: a new key is
// copied (never retained as a slice of a larger string), and the
// resilience.RateLimiter bounds key length
// (resilience.RateLimiterOptions.MaxKeyLength).
// Code that calls Take directly must bound key length itself.
//
// Time comes from time.Now, monotonic, measured from the moment the store
// was made (first used, for the zero value), so testing/synctest's fake
// clock drives it when the store is made inside the bubble; a store made
// outside a bubble must not be used inside one.
//
// Safe for concurrent use; must not be copied after first use. The zero
// value is a store with the default cap of 10 000 keys. Take fails only for
// an invalid policy, and then changes nothing.
type MemoryStore struct {
	once    sync.Once
	maxKeys int
	epoch   time.Time
	seed    maphash.Seed
	mask    uint64
	shards  []memShard
}

// NewMemoryStore returns an in-memory store that holds at most
// maxKeys keys (over all policies). maxKeys <= 0 means the default, 10 000;
// values above math.MaxInt32 are capped there.
func NewMemoryStore(maxKeys int) *MemoryStore {
	s := &MemoryStore{maxKeys: maxKeys}
	s.once.Do(s.init)
	return s
}

func (s *MemoryStore) init() {
	n := s.maxKeys
	if n <= 0 {
		n = defaultMaxKeys
	}
	if n > maxKeyCap {
		n = maxKeyCap
	}
	s.maxKeys = n
	shards := 1
	for shards*2 <= memMaxShards && shards*2*memShardMinKeys <= n {
		shards *= 2
	}
	s.shards = make([]memShard, shards)
	for i := range s.shards {
		c := n / shards
		if i < n%shards {
			c++
		}
		s.shards[i] = memShard{
			index: make(map[memKey]int32),
			limit: int32(c),
			head:  -1,
			tail:  -1,
		}
	}
	s.mask = uint64(shards - 1)
	s.seed = maphash.MakeSeed()
	s.epoch = time.Now()
}

// maxKeysCap returns the key cap.
func (s *MemoryStore) maxKeysCap() int {
	s.once.Do(s.init)
	return s.maxKeys
}

// Len returns the number of keys held now, never more than the key cap.
func (s *MemoryStore) Len() int {
	s.once.Do(s.init)
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.index)
		sh.mu.Unlock()
	}
	return n
}

// Take implements Store. It fails only when policy is invalid (a
// *resilience.ConfigError naming the Policy field).
func (s *MemoryStore) Take(_ context.Context, key string, policy Policy) (Decision, error) {
	return s.take(key, policy, 1)
}

// take is Take for n permits, 1 <= n <= policy.Limit once the policy is
// valid (TakeN clamps).
func (s *MemoryStore) take(key string, policy Policy, n int64) (Decision, error) {
	s.once.Do(s.init)
	if err := policy.validate(); err != nil {
		return Decision{}, err
	}
	alg := policy.algorithm()
	limit, window := int64(policy.Limit), int64(policy.Window)

	sh := &s.shards[0]
	if s.mask != 0 {
		sh = &s.shards[maphash.String(s.seed, key)&s.mask]
	}
	sh.mu.Lock()
	// Read the clock under the lock so each shard sees time move forwards.
	now := int64(time.Since(s.epoch))
	e := sh.entry(memKey{policy: policy.Name, key: key}, alg, now, limit)
	var r rlResult
	switch alg {
	case TokenBucket:
		r = takeTokenBucket(&e.st, now, limit, window, n)
	case SlidingWindow:
		r = takeSlidingWindow(&e.st, now, limit, window, n)
	default:
		r = takeFixedWindow(&e.st, now, limit, window, n)
	}
	e.touched = now
	e.idle = rlIdleSpan(alg, policy.Window)
	sh.mu.Unlock()

	return Decision{
		Allowed:    r.allowed,
		Limit:      policy.Limit,
		Remaining:  int(r.remaining),
		Reset:      time.Duration(r.reset),
		RetryAfter: time.Duration(r.retryAfter),
		Policy:     policy,
	}, nil
}

// memKey keeps policies apart in one store without building a joined
// string (which would allocate on every take).
type memKey struct {
	policy, key string
}

// memShard is one lock's worth of keys: a map from key to a slot in
// entries, and a doubly linked LRU list threaded through entries by index
// (no pointers for the garbage collector, no allocation per move).
type memShard struct {
	mu      sync.Mutex
	index   map[memKey]int32
	entries []memEntry
	limit   int32    // key cap of this shard
	head    int32    // most recently used, -1 when empty
	tail    int32    // least recently used, -1 when empty
	_       [64]byte // keep neighbouring shards' mutexes off one cache line
}

type memEntry struct {
	k          memKey
	st         rlState
	touched    int64 // last take, ns on the store clock
	idle       int64 // after this long untouched, the state is back to full
	prev, next int32 // LRU neighbours, -1 at the ends
	alg        Algorithm
}

// entry returns the entry for k, moved to the front of the LRU list, or a
// new one (evicting if the shard is full) in the initial state for alg.
// Called with sh.mu held.
func (sh *memShard) entry(k memKey, alg Algorithm, now, limit int64) *memEntry {
	if i, ok := sh.index[k]; ok {
		sh.moveToFront(i)
		e := &sh.entries[i]
		if e.alg != alg { // the policy's algorithm changed: the old state means nothing
			e.alg = alg
			e.st = initialState(alg, now, limit)
		}
		return e
	}
	k.key = strings.Clone(k.key) // never pin a larger string the key was cut from
	var i int32
	if int32(len(sh.entries)) < sh.limit {
		i = int32(len(sh.entries))
		sh.entries = append(sh.entries, memEntry{})
	} else {
		i = sh.victim(now)
		delete(sh.index, sh.entries[i].k)
		sh.unlink(i)
	}
	sh.entries[i] = memEntry{k: k, alg: alg, st: initialState(alg, now, limit), prev: -1, next: -1}
	sh.index[k] = i
	sh.pushFront(i)
	return &sh.entries[i]
}

// victim picks the entry to evict from a full shard (see
// MemoryStore for the policy).
func (sh *memShard) victim(now int64) int32 {
	j := sh.tail
	for n := 0; j >= 0 && n < memEvictScan; n++ {
		e := &sh.entries[j]
		if now-e.touched >= e.idle {
			return j
		}
		j = e.prev
	}
	return sh.tail
}

func initialState(alg Algorithm, now, limit int64) rlState {
	if alg == TokenBucket {
		return newBucketState(now, limit)
	}
	return newWindowState(now)
}

func (sh *memShard) moveToFront(i int32) {
	if sh.head == i {
		return
	}
	sh.unlink(i)
	sh.pushFront(i)
}

func (sh *memShard) unlink(i int32) {
	e := &sh.entries[i]
	if e.prev >= 0 {
		sh.entries[e.prev].next = e.next
	} else {
		sh.head = e.next
	}
	if e.next >= 0 {
		sh.entries[e.next].prev = e.prev
	} else {
		sh.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (sh *memShard) pushFront(i int32) {
	e := &sh.entries[i]
	e.prev = -1
	e.next = sh.head
	if sh.head >= 0 {
		sh.entries[sh.head].prev = i
	} else {
		sh.tail = i
	}
	sh.head = i
}
