package resilience

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/property"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

func rlNew(t interface {
	Helper()
	Fatal(...any)
}, opts RateLimiterOptions) *RateLimiter {
	t.Helper()
	l, err := NewRateLimiter(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Invariant: every invalid option is a *ConfigError naming the field as
// RateLimiterOptions.Field, from NewRateLimiter and from Builder.Build.
func TestRateLimiterOptionsValidation(t *testing.T) {
	ok := RateLimiterOptions{PermitLimit: 10, Window: time.Second}
	with := func(f func(*RateLimiterOptions)) RateLimiterOptions { o := ok; f(&o); return o }
	for _, tc := range []struct {
		name  string
		opts  RateLimiterOptions
		field string
	}{
		{"unknown algorithm", with(func(o *RateLimiterOptions) { o.Algorithm = "leaky-bucket" }), "RateLimiterOptions.Algorithm"},
		{"unknown algorithm", with(func(o *RateLimiterOptions) { o.Algorithm = "leaky-bucket" }), "RateLimiterOptions.Algorithm"},
		{"zero permit limit", with(func(o *RateLimiterOptions) { o.PermitLimit = 0 }), "RateLimiterOptions.PermitLimit"},
		{"negative permit limit", with(func(o *RateLimiterOptions) { o.PermitLimit = -1 }), "RateLimiterOptions.PermitLimit"},
		{"zero window", with(func(o *RateLimiterOptions) { o.Window = 0 }), "RateLimiterOptions.Window"},
		{"negative window", with(func(o *RateLimiterOptions) { o.Window = -time.Second }), "RateLimiterOptions.Window"},
		{"huge window", with(func(o *RateLimiterOptions) { o.Window = maxDuration + 1 }), "RateLimiterOptions.Window"},
		{"negative max keys", with(func(o *RateLimiterOptions) { o.MaxKeys = -1 }), "RateLimiterOptions.MaxKeys"},
		{"huge max keys", with(func(o *RateLimiterOptions) { o.MaxKeys = maxRateLimitMaxKeys + 1 }), "RateLimiterOptions.MaxKeys"},
		{"negative max key length", with(func(o *RateLimiterOptions) { o.MaxKeyLength = -1 }), "RateLimiterOptions.MaxKeyLength"},
		{"max key length too small for the hash", with(func(o *RateLimiterOptions) { o.MaxKeyLength = 31 }), "RateLimiterOptions.MaxKeyLength"},
		{"zero value", RateLimiterOptions{}, "RateLimiterOptions.PermitLimit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewRateLimiter(tc.opts)
			var ce *ConfigError
			if l != nil || !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("NewRateLimiter: %v, %v; want *ConfigError for %s", l, err, tc.field)
			}
			_, err = NewBuilder[int]().AddRateLimiter(tc.opts).Build()
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("Build: %v; want *ConfigError for %s", err, tc.field)
			}
		})
	}
	for _, o := range []RateLimiterOptions{
		ok,
		with(func(o *RateLimiterOptions) { o.Algorithm = ratelimit.SlidingWindow; o.MaxKeys = 1; o.MaxKeyLength = 32 }),
		with(func(o *RateLimiterOptions) {
			o.Algorithm = ratelimit.TokenBucket
			o.Window = maxDuration
			o.MaxKeys = maxRateLimitMaxKeys
		}),
	} {
		if _, err := NewRateLimiter(o); err != nil {
			t.Fatalf("valid options %+v: %v", o, err)
		}
	}
}

// Invariant: no option value panics; each is either a *ConfigError naming a
// RateLimiterOptions field or a limiter whose first take for a fresh key is
// granted with Remaining = PermitLimit−1.
func FuzzRateLimiterOptions(f *testing.F) {
	f.Add("", "", 10, int64(time.Second), 0, 0, "k")
	f.Add("api", "sliding-window", 1, int64(1), 1, 32, strings.Repeat("x", 40))
	f.Add("api", "token-bucket", 1<<40, int64(maxDuration), maxRateLimitMaxKeys, 1<<20, "")
	f.Add("x", "leaky", -1, int64(-1), -1, -1, "k")
	f.Add("x", "fixed-window", 5, int64(maxDuration)+1, 0, 31, "k")
	f.Fuzz(func(t *testing.T, name, alg string, limit int, window int64, maxKeys, maxKeyLen int, key string) {
		opts := RateLimiterOptions{
			Name: name, Algorithm: ratelimit.Algorithm(alg), PermitLimit: limit,
			Window: time.Duration(window), MaxKeys: maxKeys, MaxKeyLength: maxKeyLen,
		}
		l, err := NewRateLimiter(opts)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Field, "RateLimiterOptions.") || l != nil {
				t.Fatalf("%+v: error %v is not a *ConfigError naming a field", opts, err)
			}
			return
		}
		d, err := l.AllowKey(context.Background(), key)
		if err != nil || !d.Allowed || d.Remaining != limit-1 || d.Limit != limit || d.RetryAfter != 0 {
			t.Fatalf("%+v: first take %+v, %v", opts, d, err)
		}
	})
}

// Invariant: defaults — strategy name "RateLimiter", policy name "default",
// fixed window; a named limiter uses its name for both.
func TestRateLimiterDefaults(t *testing.T) {
	l := rlNew(t, RateLimiterOptions{PermitLimit: 5, Window: time.Minute})
	want := ratelimit.Policy{Name: "default", Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Minute}
	if l.Policy() != want || StrategyName(l) != "RateLimiter" || l.validate() != nil {
		t.Fatalf("policy %+v name %q", l.Policy(), StrategyName(l))
	}
	l = rlNew(t, RateLimiterOptions{Name: "api", Algorithm: ratelimit.TokenBucket, PermitLimit: 5, Window: time.Minute})
	if l.Policy().Name != "api" || StrategyName(l) != "api" || l.Policy().Algorithm != ratelimit.TokenBucket {
		t.Fatalf("policy %+v name %q", l.Policy(), StrategyName(l))
	}
	d, err := l.Allow(context.Background())
	if err != nil || d.Policy != l.Policy() {
		t.Fatalf("decision policy %+v, %v", d.Policy, err)
	}
}

// Invariant: the zero RateLimiter never panics and never runs the callback:
// it returns the *ConfigError Validate reports.
func TestRateLimiterZeroValue(t *testing.T) {
	var l RateLimiter
	ran := false
	err := l.Execute(context.Background(), Telemetry{}, func(context.Context) error { ran = true; return nil })
	var ce *ConfigError
	if ran || !errors.As(err, &ce) || ce.Field != "RateLimiterOptions.PermitLimit" {
		t.Fatalf("zero limiter: ran %v, err %v", ran, err)
	}
	if _, err := l.Allow(context.Background()); !errors.As(err, &ce) {
		t.Fatalf("zero limiter Allow: %v", err)
	}
	// Valid options but not built by NewRateLimiter: still an error, no panic.
	l2 := RateLimiter{opts: RateLimiterOptions{PermitLimit: 1, Window: time.Second}}
	if _, err := l2.AllowKey(context.Background(), "k"); !errors.As(err, &ce) || ce.Field != "RateLimiter" {
		t.Fatalf("unbuilt limiter: %v", err)
	}
}

var rlClient = property.NewKey[string]("client")

func rlClientCtx(c string) context.Context { return rlClient.With(context.Background(), c) }

func rlClientKey(ctx context.Context) string { v, _ := rlClient.Value(ctx); return v }

// Invariant: keys are isolated — exhausting one key's quota leaves every
// other key's untouched.
func TestRateLimiterPerKeyIsolation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.TokenBucket} {
			l := rlNew(t, RateLimiterOptions{Algorithm: alg, PermitLimit: 2, Window: time.Minute, Key: rlClientKey})
			for range 2 {
				if d, _ := l.Allow(rlClientCtx("alice")); !d.Allowed {
					t.Fatalf("%s: alice refused early", alg)
				}
			}
			if d, _ := l.Allow(rlClientCtx("alice")); d.Allowed {
				t.Fatalf("%s: alice over her limit", alg)
			}
			if d, _ := l.Allow(rlClientCtx("bob")); !d.Allowed || d.Remaining != 1 {
				t.Fatalf("%s: bob affected by alice: %+v", alg, d)
			}
			if d, _ := l.Allow(context.Background()); !d.Allowed || d.Remaining != 1 {
				t.Fatalf("%s: the empty key affected by alice: %+v", alg, d)
			}
		}
	})
}

// Invariant: a nil Key means one partition shared by every execution.
func TestRateLimiterNilKeySinglePartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := rlNew(t, RateLimiterOptions{PermitLimit: 2, Window: time.Minute})
		if d, _ := l.Allow(rlClientCtx("alice")); !d.Allowed {
			t.Fatal("first refused")
		}
		if d, _ := l.Allow(rlClientCtx("bob")); !d.Allowed || d.Remaining != 0 {
			t.Fatalf("second: %+v", d)
		}
		if d, _ := l.Allow(context.Background()); d.Allowed {
			t.Fatal("third admitted: partitions are not shared")
		}
	})
}

// rlRecordingStore records the keys it is asked about and can fail.
type rlRecordingStore struct {
	inner ratelimit.MemoryStore
	keys  []string
	err   error
}

func (s *rlRecordingStore) Take(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	s.keys = append(s.keys, key)
	if s.err != nil {
		return ratelimit.Decision{}, s.err
	}
	return s.inner.Take(ctx, key, p)
}

// Invariant: the key length cap bounds every stored key, keeps long keys
// that share a long prefix distinct, maps one long key to one stored key
// every time, and leaves keys within the cap untouched.
func TestRateLimiterKeyLengthCap(t *testing.T) {
	store := &rlRecordingStore{}
	l := rlNew(t, RateLimiterOptions{PermitLimit: 1, Window: time.Hour, MaxKeyLength: 40, Store: store})
	prefix := strings.Repeat("p", 5000)
	a, b := prefix+"a", prefix+"b"
	if d, _ := l.AllowKey(context.Background(), a); !d.Allowed {
		t.Fatal("a refused")
	}
	if d, _ := l.AllowKey(context.Background(), b); !d.Allowed {
		t.Fatal("b refused: two long keys with a shared prefix share a partition")
	}
	if d, _ := l.AllowKey(context.Background(), a); d.Allowed {
		t.Fatal("a admitted twice: one long key maps to different partitions")
	}
	short := strings.Repeat("s", 40)
	l.AllowKey(context.Background(), short)
	for i, k := range store.keys[:3] {
		if len(k) != 40 || !strings.HasPrefix(k, prefix[:18]) {
			t.Fatalf("stored key %d: %q (len %d)", i, k, len(k))
		}
	}
	if store.keys[0] == store.keys[1] || store.keys[0] != store.keys[2] || store.keys[3] != short {
		t.Fatalf("stored keys %q", store.keys)
	}
	// Default cap 256.
	l = rlNew(t, RateLimiterOptions{PermitLimit: 1, Window: time.Hour, Store: store})
	l.AllowKey(context.Background(), prefix)
	if k := store.keys[len(store.keys)-1]; len(k) != defaultRateLimitMaxKeyLength {
		t.Fatalf("default cap: stored key length %d", len(k))
	}
}

// Invariant: shortening is deterministic (the same in every process), exact
// in length, and the identity for keys within the cap.
func FuzzRateLimitKeyShortening(f *testing.F) {
	f.Add("", 32)
	f.Add(strings.Repeat("k", 33), 32)
	f.Add(strings.Repeat("\xff", 300), 256)
	f.Fuzz(func(t *testing.T, key string, max int) {
		if max < minRateLimitMaxKeyLength || max > 1<<16 {
			return
		}
		l := rlNew(t, RateLimiterOptions{PermitLimit: 1, Window: time.Hour, MaxKeyLength: max, Store: &rlRecordingStore{}})
		l.AllowKey(context.Background(), key)
		l.AllowKey(context.Background(), key)
		got := l.store.(*rlRecordingStore).keys
		if got[0] != got[1] || len(got[0]) > max {
			t.Fatalf("key %q cap %d: stored %q then %q", key, max, got[0], got[1])
		}
		if len(key) <= max && got[0] != key {
			t.Fatalf("short key %q changed to %q", key, got[0])
		}
		if len(key) > max && (len(got[0]) != max || got[0][:max-rateLimitKeyHashLen] != key[:max-rateLimitKeyHashLen]) {
			t.Fatalf("long key %q cap %d became %q", key, max, got[0])
		}
	})
}

// rlEvents collects telemetry events.
type rlEvents struct{ list []event.Event }

func (r *rlEvents) OnEvent(_ context.Context, e event.Event) { r.list = append(r.list, e) }

// Invariant: a refusal is a *RateLimitRejectedError (errors.Is
// ErrRateLimitRejected and ErrRejected) with exact RetryAfter, Limit,
// Remaining and Reset; the callback does not run; event.RateLimiterRejected
// is emitted with Reason "rate-limited" and the retry-after.
func TestRateLimiterExecuteRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		events := &rlEvents{}
		p, err := NewBuilder[int](WithName("api"), WithListener(events)).
			AddRateLimiter(RateLimiterOptions{Name: "per-client", PermitLimit: 2, Window: 10 * time.Second, Key: rlClientKey}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		fn := func(context.Context) (int, error) { calls++; return 7, nil }
		ctx := rlClientCtx("alice")
		for range 2 {
			if v, err := p.Execute(ctx, fn); v != 7 || err != nil {
				t.Fatalf("admitted execution: %v, %v", v, err)
			}
		}
		time.Sleep(3 * time.Second)
		_, err = p.Execute(ctx, fn)
		var rej *RateLimitRejectedError
		if !errors.As(err, &rej) || !errors.Is(err, ErrRateLimitRejected) || !errors.Is(err, ErrRejected) {
			t.Fatalf("err %v; want *RateLimitRejectedError", err)
		}
		want := RateLimitRejectedError{RetryAfter: 7 * time.Second, Limit: 2, Remaining: 0, Reset: 7 * time.Second}
		if *rej != want || calls != 2 {
			t.Fatalf("rejection %+v (calls %d); want %+v", *rej, calls, want)
		}
		if len(events.list) != 1 {
			t.Fatalf("events %+v", events.list)
		}
		e := events.list[0]
		if e.Name != event.RateLimiterRejected || e.Reason != event.ReasonRateLimited || e.Duration != 7*time.Second ||
			e.Pipeline != "api" || e.Strategy != "per-client" || e.Err != error(rej) {
			t.Fatalf("event %+v", e)
		}
		if _, err := p.Execute(rlClientCtx("bob"), fn); err != nil {
			t.Fatalf("bob: %v", err)
		}
	})
}

// Invariant: a store error fails open by default (the callback runs) and
// closed with FailClosed (the callback does not run, the error is a
// *RateLimitStoreError wrapping the store's, not a rejection); both emit
// event.RateLimiterStoreError; Allow reports the applied decision.
func TestRateLimiterStoreErrors(t *testing.T) {
	boom := errors.New("store down")
	for _, failClosed := range []bool{false, true} {
		t.Run("FailClosed="+strconv.FormatBool(failClosed), func(t *testing.T) {
			events := &rlEvents{}
			l := rlNew(t, RateLimiterOptions{Name: "rl", PermitLimit: 3, Window: time.Second, Store: &rlRecordingStore{err: boom}, FailClosed: failClosed})
			ran := false
			err := l.Execute(context.Background(), NewTelemetry("p", "rl", events), func(context.Context) error { ran = true; return nil })
			if ran == failClosed {
				t.Fatalf("callback ran: %v", ran)
			}
			reason := "fail-open"
			if failClosed {
				reason = "fail-closed"
				var se *RateLimitStoreError
				if !errors.As(err, &se) || !errors.Is(err, boom) || !errors.Is(err, ErrRateLimitStore) || errors.Is(err, ErrRejected) || se.Policy != "rl" {
					t.Fatalf("err %v", err)
				}
			} else if err != nil {
				t.Fatalf("fail-open returned %v", err)
			}
			if len(events.list) != 1 || events.list[0].Name != event.RateLimiterStoreError ||
				events.list[0].Reason != reason || !errors.Is(events.list[0].Err, boom) {
				t.Fatalf("events %+v", events.list)
			}
			d, err := l.Allow(context.Background())
			if !errors.Is(err, ErrRateLimitStore) || d.Allowed == failClosed || d.Limit != 3 || d.Policy != l.Policy() {
				t.Fatalf("Allow: %+v, %v", d, err)
			}
		})
	}
}

// Invariant: Take reports what Execute reports, so a caller that runs the
// limiter itself (the inbound middleware) emits the same events with the
// same fields: admitted, rejected, and a store failure open or closed.
func TestRateLimiterTakeEmitsAsExecute(t *testing.T) {
	boom := errors.New("store down")
	for _, c := range []struct {
		name string
		opts RateLimiterOptions
	}{
		{"rejected", RateLimiterOptions{Name: "rl", PermitLimit: 1, Window: time.Minute}},
		{"fail-open", RateLimiterOptions{Name: "rl", PermitLimit: 1, Window: time.Minute, Store: &rlRecordingStore{err: boom}}},
		{"fail-closed", RateLimiterOptions{Name: "rl", PermitLimit: 1, Window: time.Minute, Store: &rlRecordingStore{err: boom}, FailClosed: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Two limiters alike: the second take of each is the case's.
				viaExecute, viaTake := rlNew(t, c.opts), rlNew(t, c.opts)
				execEvents, takeEvents := &rlEvents{}, &rlEvents{}
				execTel, takeTel := NewTelemetry("p", "rl", execEvents), NewTelemetry("p", "rl", takeEvents)
				for range 2 {
					ran := false
					execErr := viaExecute.Execute(context.Background(), execTel, func(context.Context) error { ran = true; return nil })
					d, takeErr := viaTake.Take(context.Background(), takeTel)
					if d.Allowed != ran {
						t.Fatalf("Take allowed %v, Execute ran %v", d.Allowed, ran)
					}
					if !d.Allowed && fmt.Sprint(takeErr) != fmt.Sprint(execErr) {
						t.Fatalf("Take's error %v, Execute's %v", takeErr, execErr)
					}
				}
				if len(takeEvents.list) != len(execEvents.list) || len(takeEvents.list) == 0 {
					t.Fatalf("Take emitted %+v, Execute %+v", takeEvents.list, execEvents.list)
				}
				for i, e := range takeEvents.list {
					x := execEvents.list[i]
					if e.Name != x.Name || e.Reason != x.Reason || e.Duration != x.Duration || e.Pipeline != x.Pipeline ||
						e.Strategy != x.Strategy || fmt.Sprint(e.Err) != fmt.Sprint(x.Err) {
						t.Errorf("Take's event %+v, Execute's %+v", e, x)
					}
				}
			})
		})
	}
	var zero RateLimiter
	var ce *ConfigError
	if d, err := zero.Take(context.Background(), Telemetry{}); d.Allowed || !errors.As(err, &ce) {
		t.Errorf("zero limiter Take: %+v, %v", d, err)
	}
}

// Invariant: a custom Store replaces the in-memory one and gets the policy.
func TestRateLimiterUsesCustomStore(t *testing.T) {
	var got ratelimit.Policy
	store := rlStoreFunc(func(_ context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
		got = p
		return ratelimit.Decision{Allowed: false, Limit: p.Limit, RetryAfter: time.Second}, nil
	})
	l := rlNew(t, RateLimiterOptions{Name: "shared", Algorithm: ratelimit.SlidingWindow, PermitLimit: 9, Window: time.Minute, Store: store})
	err := l.Execute(context.Background(), Telemetry{}, func(context.Context) error { return nil })
	var rej *RateLimitRejectedError
	if !errors.As(err, &rej) || rej.RetryAfter != time.Second || got != l.Policy() {
		t.Fatalf("err %v, policy %+v", err, got)
	}
}

type rlStoreFunc func(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error)

func (f rlStoreFunc) Take(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	return f(ctx, key, p)
}

// Invariant: one limiter added to two pipelines shares its counts.
func TestRateLimiterSharedAcrossPipelines(t *testing.T) {
	l := rlNew(t, RateLimiterOptions{PermitLimit: 1, Window: time.Hour})
	p1, err1 := NewBuilder[int]().AddStrategy(l).Build()
	p2, err2 := NewBuilder[int]().AddStrategy(l).Build()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	fn := func(context.Context) (int, error) { return 1, nil }
	if _, err := p1.Execute(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Execute(context.Background(), fn); !errors.Is(err, ErrRateLimitRejected) {
		t.Fatalf("second pipeline: %v", err)
	}
}

// BenchmarkRateLimiterAllow measures the hot path: an existing key, one
// shard lock, no allocation.
func BenchmarkRateLimiterAllow(b *testing.B) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.TokenBucket} {
		b.Run(string(alg), func(b *testing.B) {
			l := rlNew(b, RateLimiterOptions{Algorithm: alg, PermitLimit: 1 << 40, Window: time.Hour, Key: rlClientKey})
			ctx := rlClientCtx("203.0.113.7")
			l.Allow(ctx)
			b.ReportAllocs()
			for b.Loop() {
				if d, _ := l.Allow(ctx); !d.Allowed {
					b.Fatal("refused")
				}
			}
		})
	}
}

// BenchmarkRateLimiterExecute measures the limiter as a strategy (the
// pipeline's own cost excluded).
func BenchmarkRateLimiterExecute(b *testing.B) {
	l := rlNew(b, RateLimiterOptions{PermitLimit: 1 << 40, Window: time.Hour})
	next := func(context.Context) error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Execute(ctx, Telemetry{}, next); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRateLimiterAllowParallel measures contention: every goroutine on
// its own few keys spread over the shards.
func BenchmarkRateLimiterAllowParallel(b *testing.B) {
	l := rlNew(b, RateLimiterOptions{PermitLimit: 1 << 40, Window: time.Hour})
	keys := make([]string, 256)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(64))
		ctx := context.Background()
		for pb.Next() {
			l.AllowKey(ctx, keys[i%len(keys)])
			i++
		}
	})
}

// BenchmarkRateLimiterManyKeys measures the flood case: every take is a new
// key at a full store, so each one evicts (and copies the new key).
func BenchmarkRateLimiterManyKeys(b *testing.B) {
	l := rlNew(b, RateLimiterOptions{PermitLimit: 10, Window: time.Hour, MaxKeys: 1024})
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		l.AllowKey(ctx, keys[i&(len(keys)-1)])
		i++
	}
}

func TestRateLimitStoreErrorZeroValue(t *testing.T) {
	var e RateLimitStoreError
	if e.Error() == "" || !errors.Is(&e, ErrRateLimitStore) {
		t.Fatalf("zero RateLimitStoreError: %q", e.Error())
	}
}
