package resilience

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/internal/queue"
	"github.com/ylcnfrht/resilience/core/property"
)

// clPriorityKey carries a test execution's priority; clPriority reads it.
var clPriorityKey = property.NewKey[int]("test-priority")

func clPriority(ctx context.Context) int {
	p, _ := clPriorityKey.Value(ctx)
	return p
}

func newTestLimiter(t testing.TB, opts ConcurrencyLimiterOptions) *ConcurrencyLimiter {
	t.Helper()
	l, err := NewConcurrencyLimiter(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func wantStats(t testing.TB, l *ConcurrencyLimiter, want LimiterStats) {
	t.Helper()
	if got := l.Stats(); got != want {
		t.Fatalf("Stats() = %+v, want %+v", got, want)
	}
}

func wantReason(t testing.TB, err error, reason RejectReason) {
	t.Helper()
	var br *ConcurrencyLimitRejectedError
	if !errors.As(err, &br) || br.Reason != reason {
		t.Fatalf("err = %v, want *ConcurrencyLimitRejectedError{%s}", err, reason)
	}
	if !errors.Is(err, ErrConcurrencyLimitRejected) || !errors.Is(err, ErrRejected) {
		t.Fatalf("err = %v does not match the concurrency limit sentinels", err)
	}
}

// clAcquirer runs Acquire on its own goroutine so a test can watch it queue.
type clAcquirer struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan error
}

// startAcquire starts Acquire with the given priority and, inside a synctest
// bubble, waits until it has either returned or blocked in the queue.
func startAcquire(l *ConcurrencyLimiter, prio int) *clAcquirer {
	ctx, cancel := context.WithCancel(clPriorityKey.With(context.Background(), prio))
	a := &clAcquirer{ctx: ctx, cancel: cancel, done: make(chan error, 1)}
	go func() { a.done <- acquireErr(l, ctx) }()
	synctest.Wait()
	return a
}

// result returns Acquire's result and true, or false if it is still waiting.
func (a *clAcquirer) result() (error, bool) {
	select {
	case err := <-a.done:
		a.done <- err // keep it for later calls
		return err, true
	default:
		return nil, false
	}
}

func (a *clAcquirer) wantWaiting(t testing.TB) {
	t.Helper()
	if err, ok := a.result(); ok {
		t.Fatalf("Acquire returned %v, want it still queued", err)
	}
}

func (a *clAcquirer) wantResult(t testing.TB) error {
	t.Helper()
	err, ok := a.result()
	if !ok {
		t.Fatal("Acquire still waiting, want it to have returned")
	}
	return err
}

func (a *clAcquirer) wantGranted(t testing.TB) {
	t.Helper()
	if err := a.wantResult(t); err != nil {
		t.Fatalf("Acquire = %v, want a permit", err)
	}
}

func TestConcurrencyLimiterOptionsValidation(t *testing.T) {
	cases := []struct {
		name  string
		opts  ConcurrencyLimiterOptions
		field string // "" means valid
	}{
		{"minimal", ConcurrencyLimiterOptions{PermitLimit: 1}, ""},
		{"everything", ConcurrencyLimiterOptions{Name: "x", PermitLimit: 10, QueueLimit: 5, QueueTimeout: time.Second, Priority: clPriority, Overflow: OverflowDropLowestPriority}, ""},
		{"drop oldest", ConcurrencyLimiterOptions{PermitLimit: 1, Overflow: OverflowDropOldest}, ""},
		{"explicit reject new", ConcurrencyLimiterOptions{PermitLimit: 1, Overflow: OverflowRejectNew}, ""},
		{"zero permits", ConcurrencyLimiterOptions{}, "ConcurrencyLimiterOptions.PermitLimit"},
		{"negative permits", ConcurrencyLimiterOptions{PermitLimit: -1}, "ConcurrencyLimiterOptions.PermitLimit"},
		{"negative queue", ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: -1}, "ConcurrencyLimiterOptions.QueueLimit"},
		{"negative queue timeout", ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: -time.Second}, "ConcurrencyLimiterOptions.QueueTimeout"},
		{"huge queue timeout", ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: maxDuration + 1}, "ConcurrencyLimiterOptions.QueueTimeout"},
		{"unknown overflow", ConcurrencyLimiterOptions{PermitLimit: 1, Overflow: "drop-newest"}, "ConcurrencyLimiterOptions.Overflow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := NewConcurrencyLimiter(c.opts)
			_, berr := NewBuilder[int]().AddConcurrencyLimiter(c.opts).Build()
			if c.field == "" {
				if err != nil || berr != nil {
					t.Fatalf("valid options rejected: %v / %v", err, berr)
				}
				if verr := l.validate(); verr != nil {
					t.Fatalf("Validate on a built limiter: %v", verr)
				}
				return
			}
			if l != nil {
				t.Fatal("invalid options returned a limiter")
			}
			for _, e := range []error{err, berr} {
				var ce *ConfigError
				if !errors.As(e, &ce) || ce.Field != c.field {
					t.Fatalf("err = %v, want a *ConfigError for %s", e, c.field)
				}
				if !errors.Is(e, ErrInvalidOptions) {
					t.Fatalf("err = %v does not match ErrInvalidOptions", e)
				}
			}
		})
	}
}

func TestConcurrencyLimiterDefaults(t *testing.T) {
	l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 3})
	if StrategyName(l) != "ConcurrencyLimiter" {
		t.Errorf("StrategyName() = %q", StrategyName(l))
	}
	if o := engineOptions(3, 0, 0, nil, "", nil); o.Overflow != queue.RejectNew {
		t.Errorf("default overflow = %v, want reject-new", o.Overflow)
	}
	if o := engineOptions(3, 1, 0, clPriority, "", nil); o.Overflow != queue.DropLowestPriority {
		t.Errorf("default overflow with a Priority function = %v, want drop-lowest-priority", o.Overflow)
	}
	wantStats(t, l, LimiterStats{Limit: 3})
	named := newTestLimiter(t, ConcurrencyLimiterOptions{Name: "db", PermitLimit: 1})
	if StrategyName(named) != "db" {
		t.Errorf("StrategyName() = %q, want db", StrategyName(named))
	}
}

// FuzzConcurrencyLimiterOptions: any options either build a working limiter
// or return a *ConfigError; nothing panics.
func FuzzConcurrencyLimiterOptions(f *testing.F) {
	f.Add(1, 0, int64(0), "")
	f.Add(10, 5, int64(time.Second), "drop-oldest")
	f.Add(0, 0, int64(0), "")
	f.Add(-5, -1, int64(-1), "reject-new")
	f.Add(1, 1, int64(maxDuration)+1, "drop-lowest-priority")
	f.Add(1, 1, int64(1), "nonsense")
	f.Fuzz(func(t *testing.T, permits, queue int, timeout int64, overflow string) {
		opts := ConcurrencyLimiterOptions{PermitLimit: permits, QueueLimit: queue, QueueTimeout: time.Duration(timeout), Overflow: OverflowPolicy(overflow)}
		l, err := NewConcurrencyLimiter(opts)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Field, "ConcurrencyLimiterOptions.") {
				t.Fatalf("error %v is not a *ConfigError naming a field", err)
			}
			return
		}
		if err := l.validate(); err != nil {
			t.Fatalf("built limiter fails Validate: %v", err)
		}
		if _, ok := l.TryAcquire(); !ok {
			t.Fatal("a new limiter has no free permit")
		}
		l.Release()
		wantStats(t, l, LimiterStats{Limit: permits})
	})
}

// Invariant 1 on the fast path: at most PermitLimit permits, no queue means
// an immediate ReasonFull, and every permit comes back.
func TestConcurrencyLimiterFastPathAndFull(t *testing.T) {
	l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 2})
	ctx := context.Background()
	for range 2 {
		if _, err := l.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wantStats(t, l, LimiterStats{Limit: 2, InFlight: 2})
	wantReason(t, acquireErr(l, ctx), ReasonFull)
	if _, ok := l.TryAcquire(); ok {
		t.Fatal("TryAcquire succeeded with every permit in use")
	}
	l.Release()
	if _, ok := l.TryAcquire(); !ok {
		t.Fatal("TryAcquire failed with a free permit")
	}
	l.Release()
	l.Release()
	wantStats(t, l, LimiterStats{Limit: 2})
}

// The zero value rejects rather than panics or admits without limit.
func TestConcurrencyLimiterZeroValueRejects(t *testing.T) {
	var l ConcurrencyLimiter
	wantReason(t, acquireErr(&l, context.Background()), ReasonFull)
	if _, ok := l.TryAcquire(); ok {
		t.Fatal("zero value granted a permit")
	}
	var ce *ConfigError
	if err := l.validate(); !errors.As(err, &ce) || ce.Field != "ConcurrencyLimiterOptions.PermitLimit" {
		t.Fatalf("Validate() = %v", err)
	}
	if StrategyName(&l) != "ConcurrencyLimiter" {
		t.Fatalf("StrategyName() = %q", StrategyName(&l))
	}
}

func TestConcurrencyLimiterReleaseWithoutPermitPanics(t *testing.T) {
	l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1})
	defer func() {
		if recover() == nil {
			t.Fatal("Release without a permit did not panic")
		}
		wantStats(t, l, LimiterStats{Limit: 1}) // and the count did not go negative
	}()
	l.Release()
}

// Invariant: a caller whose context is already done is neither admitted nor
// queued, and its priority is never computed.
func TestConcurrencyLimiterDoneContextIsNotQueued(t *testing.T) {
	var prioCalls atomic.Int32
	l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 5,
		Priority: func(context.Context) int { prioCalls.Add(1); return 0 }})
	cause := errors.New("client went away")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if _, err := l.Acquire(ctx); err != cause {
		t.Fatalf("free permit, done context: Acquire = %v, want the cause", err)
	}
	if _, ok := l.TryAcquire(); !ok {
		t.Fatal("permit lost")
	}
	if _, err := l.Acquire(ctx); err != cause {
		t.Fatalf("full limiter, done context: Acquire = %v, want the cause", err)
	}
	wantStats(t, l, LimiterStats{Limit: 1, InFlight: 1})
	if n := prioCalls.Load(); n != 0 {
		t.Fatalf("Priority called %d times", n)
	}
	l.Release()
}

// Priority is computed only when an execution has to queue.
func TestConcurrencyLimiterPriorityOnlyOnSlowPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var prioCalls atomic.Int32
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, Overflow: OverflowRejectNew,
			Priority: func(context.Context) int { prioCalls.Add(1); return 0 }})
		if _, err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		if prioCalls.Load() != 0 {
			t.Fatal("Priority called on the fast path")
		}
		a := startAcquire(l, 0)
		a.wantWaiting(t)
		if prioCalls.Load() != 1 {
			t.Fatalf("Priority called %d times for one queued execution", prioCalls.Load())
		}
		// With reject-new and a full queue the newcomer is shed without
		// running the priority function.
		b := startAcquire(l, 0)
		wantReason(t, b.wantResult(t), ReasonFull)
		if prioCalls.Load() != 1 {
			t.Fatalf("Priority called for an execution shed by reject-new")
		}
		l.Release()
		synctest.Wait()
		a.wantGranted(t)
		l.Release()
		a.cancel()
		b.cancel()
	})
}

// Invariant: the priority function runs outside the lock; a permit freed
// meanwhile is taken directly instead of queueing behind nobody.
func TestConcurrencyLimiterPermitFreedWhilePrioritising(t *testing.T) {
	var l *ConcurrencyLimiter
	l = newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1,
		Priority: func(context.Context) int {
			l.Release() // the holder finishes while the newcomer is being ranked
			return 0
		}})
	if _, ok := l.TryAcquire(); !ok {
		t.Fatal("no permit")
	}
	if _, err := l.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantStats(t, l, LimiterStats{Limit: 1, InFlight: 1})
	l.Release()
}

// Invariant: the queue grants by priority (lower first), FIFO within a
// priority, and a released permit goes straight to the best waiter.
func TestConcurrencyLimiterGrantsByPriorityThenArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 10, Priority: clPriority})
		if _, err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		prios := []int{3, 1, 2, 1, 0, 3, 2}
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i, p := range prios {
			wg.Go(func() {
				if _, err := l.Acquire(clPriorityKey.With(context.Background(), p)); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				l.Release()
			})
			synctest.Wait() // fix the arrival order
		}
		wantStats(t, l, LimiterStats{Limit: 1, InFlight: 1, Queued: len(prios)})
		// A newcomer does not overtake the queue, even when it arrives just
		// as the permit is released.
		if _, ok := l.TryAcquire(); ok {
			t.Fatal("TryAcquire overtook the queue")
		}
		l.Release()
		wg.Wait()
		want := []int{4, 1, 3, 2, 6, 0, 5}
		if fmt.Sprint(order) != fmt.Sprint(want) {
			t.Fatalf("grant order %v, want %v", order, want)
		}
		wantStats(t, l, LimiterStats{Limit: 1})
	})
}

// Invariant: with reject-new, a full queue rejects the newcomer (full) and
// leaves the waiters alone.
func TestConcurrencyLimiterRejectNewWhenQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 2, Priority: clPriority, Overflow: OverflowRejectNew})
		if _, err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		a, b := startAcquire(l, 5), startAcquire(l, 5)
		c := startAcquire(l, 0) // outranks both, still rejected
		wantReason(t, c.wantResult(t), ReasonFull)
		a.wantWaiting(t)
		b.wantWaiting(t)
		wantStats(t, l, LimiterStats{Limit: 1, InFlight: 1, Queued: 2})
		l.Release()
		synctest.Wait()
		a.wantGranted(t)
		l.Release()
		synctest.Wait()
		b.wantGranted(t)
		l.Release()
		wantStats(t, l, LimiterStats{Limit: 1})
	})
}

// Invariant: drop-oldest evicts the longest waiter whatever its priority
// (dropped) and queues the newcomer; running work is untouched.
func TestConcurrencyLimiterDropOldest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 2, Priority: clPriority, Overflow: OverflowDropOldest})
		if _, err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		a := startAcquire(l, 0) // oldest and best, evicted anyway
		b := startAcquire(l, 1)
		c := startAcquire(l, 2)
		wantReason(t, a.wantResult(t), ReasonDropped)
		b.wantWaiting(t)
		c.wantWaiting(t)
		wantStats(t, l, LimiterStats{Limit: 1, InFlight: 1, Queued: 2})
		d := startAcquire(l, 9)
		wantReason(t, b.wantResult(t), ReasonDropped)
		l.Release()
		synctest.Wait()
		c.wantGranted(t)
		d.wantWaiting(t)
		l.Release()
		synctest.Wait()
		d.wantGranted(t)
		l.Release()
		wantStats(t, l, LimiterStats{Limit: 1})
	})
}

// Invariant: drop-lowest-priority evicts the newest waiter of the lowest
// priority only for a newcomer that strictly outranks it; otherwise the
// newcomer is rejected (full).
func TestConcurrencyLimiterDropLowestPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 3, Priority: clPriority, Overflow: OverflowDropLowestPriority})
		if _, err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		low1 := startAcquire(l, 5)
		low2 := startAcquire(l, 5)
		high := startAcquire(l, 1)

		equal := startAcquire(l, 5) // does not outrank: rejected
		wantReason(t, equal.wantResult(t), ReasonFull)
		worse := startAcquire(l, 7)
		wantReason(t, worse.wantResult(t), ReasonFull)

		mid := startAcquire(l, 3) // outranks 5: the newest 5 goes
		wantReason(t, low2.wantResult(t), ReasonDropped)
		low1.wantWaiting(t)
		mid2 := startAcquire(l, 3)
		wantReason(t, low1.wantResult(t), ReasonDropped)
		wantStats(t, l, LimiterStats{Limit: 1, InFlight: 1, Queued: 3})

		for _, next := range []*clAcquirer{high, mid, mid2} {
			l.Release()
			synctest.Wait()
			next.wantGranted(t)
		}
		l.Release()
		wantStats(t, l, LimiterStats{Limit: 1})
	})
}

// Invariant: with a Priority function and no Overflow, a full queue of
// less important waiters does not turn a more important newcomer away (the
// default is drop-lowest-priority then), while equal priorities are still
// reject-new; without a Priority function the default stays reject-new.
func TestConcurrencyLimiterDefaultOverflowFollowsPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, Priority: clPriority})
		if _, err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		low := startAcquire(l, 5)
		equal := startAcquire(l, 5)
		wantReason(t, equal.wantResult(t), ReasonFull)
		high := startAcquire(l, 0)
		wantReason(t, low.wantResult(t), ReasonDropped)
		l.Release()
		synctest.Wait()
		high.wantGranted(t)
		l.Release()

		plain := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1})
		if _, err := plain.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		first := startAcquire(plain, 0)
		second := startAcquire(plain, 0)
		wantReason(t, second.wantResult(t), ReasonFull)
		first.cancel()
		synctest.Wait()
		first.wantResult(t)
		plain.Release()
	})
}

// Invariant: a queued execution waits exactly QueueTimeout, is rejected
// with queue-timeout, and gives its queue place back.
func TestConcurrencyLimiterQueueTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: 500 * time.Millisecond})
		if _, err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := l.Acquire(context.Background())
		if waited := time.Since(start); waited != 500*time.Millisecond {
			t.Fatalf("waited %v, want exactly the queue timeout", waited)
		}
		wantReason(t, err, ReasonQueueTimeout)
		wantStats(t, l, LimiterStats{Limit: 1, InFlight: 1})
		l.Release()
	})
}

// Invariant: a queue wait never exceeds what is left of the context's
// deadline, and ends with the context's error.
func TestConcurrencyLimiterQueueWaitBoundedByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, queueTimeout := range []time.Duration{0, time.Minute} {
			l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: queueTimeout})
			if _, err := l.Acquire(context.Background()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			start := time.Now()
			_, err := l.Acquire(ctx)
			cancel()
			if waited := time.Since(start); waited != 200*time.Millisecond {
				t.Fatalf("QueueTimeout %v: waited %v, want the 200ms left on the deadline", queueTimeout, waited)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("QueueTimeout %v: err = %v, want context.DeadlineExceeded", queueTimeout, err)
			}
			wantStats(t, l, LimiterStats{Limit: 1, InFlight: 1})
			l.Release()
		}
	})
}

// Invariant 2: cancelling a queued execution frees its queue place and
// returns the context's cause.
func TestConcurrencyLimiterCancelWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 2})
		if _, err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		a, b := startAcquire(l, 0), startAcquire(l, 0)
		wantStats(t, l, LimiterStats{Limit: 1, InFlight: 1, Queued: 2})
		a.cancel()
		synctest.Wait()
		if err := a.wantResult(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
		wantStats(t, l, LimiterStats{Limit: 1, InFlight: 1, Queued: 1})
		l.Release()
		synctest.Wait()
		b.wantGranted(t)
		l.Release()
		b.cancel()
		wantStats(t, l, LimiterStats{Limit: 1})
	})
}

// Invariant 1 with limit changes: raising the limit grants waiters at once;
// lowering it never interrupts running work and admits again only once in
// flight is below the new limit.
func TestConcurrencyLimiterSetLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 5})
		if _, err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		a, b, c := startAcquire(l, 0), startAcquire(l, 0), startAcquire(l, 0)
		l.SetLimit(3)
		synctest.Wait()
		a.wantGranted(t)
		b.wantGranted(t)
		c.wantWaiting(t)
		wantStats(t, l, LimiterStats{Limit: 3, InFlight: 3, Queued: 1})

		l.SetLimit(1)
		wantStats(t, l, LimiterStats{Limit: 1, InFlight: 3, Queued: 1})
		l.Release() // 2 in flight, still over the limit
		synctest.Wait()
		c.wantWaiting(t)
		if _, ok := l.TryAcquire(); ok {
			t.Fatal("admitted while in flight exceeds the lowered limit")
		}
		l.Release() // 1 in flight: at the limit
		synctest.Wait()
		c.wantWaiting(t)
		l.Release() // 0 in flight: c gets the permit
		synctest.Wait()
		c.wantGranted(t)
		wantStats(t, l, LimiterStats{Limit: 1, InFlight: 1})

		l.SetLimit(0) // treated as 1
		wantStats(t, l, LimiterStats{Limit: 1, InFlight: 1})
		l.SetLimit(-7)
		wantStats(t, l, LimiterStats{Limit: 1, InFlight: 1})
		l.Release()
		for _, x := range []*clAcquirer{a, b, c} {
			x.cancel()
		}
	})
}

type clRecorder struct {
	mu     sync.Mutex
	events []event.Event
}

func (r *clRecorder) OnEvent(_ context.Context, e event.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *clRecorder) snapshot() []event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event.Event(nil), r.events...)
}

// Execute emits one event.ConcurrencyLimiterRejected per rejection, labelled with
// the reason, the names and the time waited; a caller's cancellation is not
// an event.
func TestConcurrencyLimiterExecuteTelemetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &clRecorder{}
		l := newTestLimiter(t, ConcurrencyLimiterOptions{Name: "bulkhead", PermitLimit: 1, QueueLimit: 1, QueueTimeout: 300 * time.Millisecond})
		p, err := NewBuilder[int](WithName("api"), WithListener(rec)).AddStrategy(l).Build()
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			v, err := p.Execute(context.Background(), func(context.Context) (int, error) {
				<-release
				return 7, nil
			})
			if v != 7 || err != nil {
				t.Errorf("Execute = %d, %v", v, err)
			}
		})
		synctest.Wait()
		var waitErr error
		wg.Go(func() {
			_, waitErr = p.Execute(context.Background(), func(context.Context) (int, error) { return 0, nil })
		})
		synctest.Wait()
		_, fullErr := p.Execute(context.Background(), func(context.Context) (int, error) { return 0, nil })
		wantReason(t, fullErr, ReasonFull)

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := p.Execute(ctx, func(context.Context) (int, error) { return 0, nil }); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Execute: %v", err)
		}

		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		wantReason(t, waitErr, ReasonQueueTimeout)
		close(release)
		wg.Wait()

		events := rec.snapshot()
		if len(events) != 2 {
			t.Fatalf("events = %+v, want 2", events)
		}
		for i, want := range []struct {
			reason RejectReason
			d      time.Duration
		}{{ReasonFull, 0}, {ReasonQueueTimeout, 300 * time.Millisecond}} {
			e := events[i]
			if e.Name != event.ConcurrencyLimiterRejected || e.Reason != string(want.reason) || e.Duration != want.d ||
				e.Pipeline != "api" || e.Strategy != "bulkhead" || !errors.Is(e.Err, ErrConcurrencyLimitRejected) {
				t.Errorf("event %d = %+v, want %s after %v", i, e, want.reason, want.d)
			}
		}
		wantStats(t, l, LimiterStats{Limit: 1})
	})
}

// Execute emits event.QueueAdmitted, with the time spent queued, for an
// execution that got its permit after queueing, and nothing for one
// admitted at once: a queue-wait histogram sees the waits that end well,
// not only those that end in a rejection.
func TestConcurrencyLimiterExecuteQueueAdmittedTelemetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &clRecorder{}
		l := newTestLimiter(t, ConcurrencyLimiterOptions{Name: "bulkhead", PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Second})
		p, err := NewBuilder[int](WithName("api"), WithListener(rec)).AddStrategy(l).Build()
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			_, _ = p.Execute(context.Background(), func(context.Context) (int, error) {
				<-release
				return 0, nil
			})
		})
		synctest.Wait()
		wg.Go(func() {
			if _, err := p.Execute(context.Background(), func(context.Context) (int, error) { return 0, nil }); err != nil {
				t.Errorf("queued Execute: %v", err)
			}
		})
		synctest.Wait()
		time.Sleep(250 * time.Millisecond)
		close(release)
		wg.Wait()

		events := rec.snapshot()
		if len(events) != 1 {
			t.Fatalf("events = %+v, want one event.QueueAdmitted", events)
		}
		if e := events[0]; e.Name != event.QueueAdmitted || e.Duration != 250*time.Millisecond ||
			e.Pipeline != "api" || e.Strategy != "bulkhead" || e.Err != nil || e.Reason != "" {
			t.Fatalf("event = %+v, want event.QueueAdmitted after 250ms", e)
		}
	})
}

// Invariant 2: a panic in the callback frees the permit and reaches the
// caller with its original value.
func TestConcurrencyLimiterExecutePanicReleasesPermit(t *testing.T) {
	l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1})
	p, err := NewBuilder[struct{}]().AddStrategy(l).Build()
	if err != nil {
		t.Fatal(err)
	}
	type boom struct{ n int }
	func() {
		defer func() {
			if r := recover(); r != (boom{42}) {
				t.Fatalf("recovered %v, want the original panic value", r)
			}
		}()
		p.Execute(context.Background(), func(context.Context) (struct{}, error) { panic(boom{42}) })
	}()
	wantStats(t, l, LimiterStats{Limit: 1})
	if _, err := p.Execute(context.Background(), func(context.Context) (struct{}, error) { return struct{}{}, nil }); err != nil {
		t.Fatalf("after the panic: %v", err)
	}
}

// Invariant 2: errors from the callback pass through and free the permit.
func TestConcurrencyLimiterExecutePassesCallbackError(t *testing.T) {
	l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1})
	want := errors.New("db down")
	err := l.Execute(context.Background(), Telemetry{}, func(context.Context) error { return want })
	if err != want {
		t.Fatalf("Execute = %v, want the callback's error", err)
	}
	wantStats(t, l, LimiterStats{Limit: 1})
}

// A limiter added to two pipelines shares its permits between them.
func TestConcurrencyLimiterSharedByPipelines(t *testing.T) {
	l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 1})
	p1, err1 := NewBuilder[int]().AddStrategy(l).Build()
	p2, err2 := NewBuilder[string]().AddStrategy(l).Build()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	p1.Execute(context.Background(), func(ctx context.Context) (int, error) {
		_, err := p2.Execute(ctx, func(context.Context) (string, error) { return "", nil })
		wantReason(t, err, ReasonFull)
		return 0, nil
	})
	wantStats(t, l, LimiterStats{Limit: 1})
}

// Invariants 1 and 2 under real contention: many goroutines acquiring,
// cancelling (some while queued, some as they are granted) and releasing
// never push the observed concurrency above the limit, and everything
// returns to zero. Run with -race.
func TestConcurrencyLimiterContention(t *testing.T) {
	for _, overflow := range []OverflowPolicy{OverflowRejectNew, OverflowDropOldest, OverflowDropLowestPriority} {
		t.Run(string(overflow), func(t *testing.T) {
			const limit, workers, rounds = 3, 24, 150
			l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: limit, QueueLimit: 6, Priority: clPriority, Overflow: overflow})
			var running, maxRunning, granted, rejected, cancelled atomic.Int64
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					for range rounds {
						ctx, cancel := context.WithCancel(clPriorityKey.With(context.Background(), rng.IntN(4)))
						var canceller sync.WaitGroup
						if rng.IntN(3) == 0 {
							canceller.Go(func() {
								for range rng.IntN(3) {
									runtime.Gosched()
								}
								cancel()
							})
						}
						_, err := l.Acquire(ctx)
						switch {
						case err == nil:
							granted.Add(1)
							n := running.Add(1)
							for m := maxRunning.Load(); n > m && !maxRunning.CompareAndSwap(m, n); m = maxRunning.Load() {
							}
							if s := l.Stats(); s.Queued > 0 && s.InFlight < s.Limit {
								t.Errorf("waiters queued beside a free permit: %+v", s)
							}
							runtime.Gosched()
							running.Add(-1)
							l.Release()
						case errors.Is(err, ErrConcurrencyLimitRejected):
							rejected.Add(1)
						case errors.Is(err, context.Canceled):
							cancelled.Add(1)
						default:
							t.Errorf("unexpected error %v", err)
						}
						canceller.Wait()
						cancel()
					}
				})
			}
			wg.Wait()
			if m := maxRunning.Load(); m > limit {
				t.Fatalf("observed %d concurrent executions, limit %d", m, limit)
			}
			if g := granted.Load(); g == 0 || g+rejected.Load()+cancelled.Load() != workers*rounds {
				t.Fatalf("outcomes do not add up: granted %d rejected %d cancelled %d", g, rejected.Load(), cancelled.Load())
			}
			wantStats(t, l, LimiterStats{Limit: limit})
		})
	}
}

// Invariant: a waiter whose context is already done is not queued, even when
// it ended while the priority function ran; it must not evict a live waiter.
func TestConcurrencyLimiterNewcomerCancelledDuringPriorityIsNotQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type cancelKey struct{}
		l, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{
			PermitLimit: 1, QueueLimit: 1, Overflow: OverflowDropOldest,
			Priority: func(ctx context.Context) int {
				if c, ok := ctx.Value(cancelKey{}).(context.CancelFunc); ok {
					c() // the client leaves while the priority is computed
				}
				return 0
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		victim := make(chan error, 1)
		go func() { victim <- acquireErr(l, context.Background()) }()
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		ctx = context.WithValue(ctx, cancelKey{}, cancel)
		if _, err := l.Acquire(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("newcomer err = %v, want context.Canceled", err)
		}
		synctest.Wait()
		select {
		case err := <-victim:
			t.Fatalf("the live waiter left the queue: %v", err)
		default:
		}
		if s := l.Stats(); s.InFlight != 1 || s.Queued != 1 {
			t.Fatalf("stats = %+v, want 1 in flight and the live waiter queued", s)
		}
		l.Release()
		if err := <-victim; err != nil {
			t.Fatalf("live waiter: %v", err)
		}
		l.Release()
	})
}

// acquireErr is Acquire for a test that releases with the limiter's
// Release (a permit counted to no flow) and wants only the error.
func acquireErr(l *ConcurrencyLimiter, ctx context.Context) error {
	_, err := l.Acquire(ctx)
	return err
}
