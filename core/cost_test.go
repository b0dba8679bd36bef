package resilience

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/property"
	"github.com/ylcnfrht/resilience/core/ratelimit"
	"pgregory.net/rapid"
)

// costAcquirer runs AcquireN on its own goroutine so a test can watch it
// queue; its permit comes back on done.
type costAcquirer struct {
	cost   int
	cancel context.CancelFunc
	done   chan costResult
	res    costResult
	ended  bool
	rel    bool // its permit was released
}

type costResult struct {
	p   ConcurrencyPermit
	err error
}

var costFlowKey = property.NewKey[string]("test-flow")

func costFlow(ctx context.Context) string {
	f, _ := costFlowKey.Value(ctx)
	return f
}

// startAcquireN starts AcquireN(cost) in flow and, in a synctest bubble,
// waits until it has returned or blocked in the queue.
func startAcquireN(l *ConcurrencyLimiter, cost int, flow string) *costAcquirer {
	ctx, cancel := context.WithCancel(costFlowKey.With(context.Background(), flow))
	a := &costAcquirer{cost: cost, cancel: cancel, done: make(chan costResult, 1)}
	go func() {
		p, err := l.AcquireN(ctx, cost)
		a.done <- costResult{p, err}
	}()
	synctest.Wait()
	return a
}

// result reports AcquireN's result once it returned.
func (a *costAcquirer) result() (costResult, bool) {
	if !a.ended {
		select {
		case a.res = <-a.done:
			a.ended = true
		default:
		}
	}
	return a.res, a.ended
}

func (a *costAcquirer) wantPermits(t *testing.T, n int) ConcurrencyPermit {
	t.Helper()
	r, ok := a.result()
	if !ok {
		t.Fatalf("AcquireN(%d) still waiting, want %d permits", a.cost, n)
	}
	if r.err != nil || r.p.Permits() != n {
		t.Fatalf("AcquireN(%d) = %d permits, %v; want %d", a.cost, r.p.Permits(), r.err, n)
	}
	return r.p
}

func (a *costAcquirer) wantWaiting(t *testing.T) {
	t.Helper()
	if r, ok := a.result(); ok {
		t.Fatalf("AcquireN(%d) returned (%d permits, %v), want it queued", a.cost, r.p.Permits(), r.err)
	}
}

// TestAcquireNHeadOfLine pins the queue's rule for costly waiters: the
// head waits for its permits and holds back the cheaper ones behind it,
// which run after it.
func TestAcquireNHeadOfLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 10, QueueLimit: 5})
		var cheap []ConcurrencyPermit
		for range 5 {
			p, ok := l.TryAcquireN(1)
			if !ok {
				t.Fatal("TryAcquireN(1) refused with permits free")
			}
			cheap = append(cheap, p)
		}
		costly := startAcquireN(l, 10, "")
		costly.wantWaiting(t)
		behind := startAcquireN(l, 1, "")
		behind.wantWaiting(t) // 5 permits are free, but the costly head waits for 10
		if _, ok := l.TryAcquireN(1); ok {
			t.Fatal("TryAcquireN(1) overtook the queue")
		}
		if s := l.Stats(); s.InFlight != 5 || s.Queued != 2 {
			t.Fatalf("Stats() = %+v, want 5 in flight, 2 queued", s)
		}
		for i, p := range cheap {
			p.Release()
			if i < 4 {
				costly.wantWaiting(t)
			}
		}
		synctest.Wait()
		big := costly.wantPermits(t, 10)
		behind.wantWaiting(t)
		if s := l.Stats(); s.InFlight != 10 {
			t.Fatalf("Stats() = %+v, want the costly execution's 10 permits", s)
		}
		big.Release()
		synctest.Wait()
		behind.wantPermits(t, 1).Release()
		if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 {
			t.Fatalf("Stats() = %+v at the end", s)
		}
	})
}

// TestAcquireNClamps: a cost below 1 is one permit, above the limit the
// whole limit; a limit lowered while a costly waiter waits clamps it to
// the new limit instead of stranding it.
func TestAcquireNClamps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 4, QueueLimit: 2})
		p, err := l.AcquireN(context.Background(), 0)
		if err != nil || p.Permits() != 1 {
			t.Fatalf("AcquireN(0) = %d permits, %v; want 1", p.Permits(), err)
		}
		a := startAcquireN(l, 100, "")
		a.wantWaiting(t) // the whole limit, once nothing else runs
		p.Release()
		synctest.Wait()
		big := a.wantPermits(t, 4)
		b := startAcquireN(l, 4, "")
		b.wantWaiting(t)
		l.SetLimit(2)
		big.Release()
		synctest.Wait()
		b.wantPermits(t, 2).Release()
		if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 {
			t.Fatalf("Stats() = %+v at the end", s)
		}
		if got := (ConcurrencyPermit{}).Permits(); got != 0 {
			t.Fatalf("zero permit's Permits() = %d", got)
		}
	})
}

// TestAcquireNFairChargesCost: a flow holding a costly permit from the
// queue is charged all its permits, so the other flow's waiters go first.
func TestAcquireNFairChargesCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 8, QueueLimit: 8, Flow: costFlow})
		all, ok := l.TryAcquireN(8)
		if !ok {
			t.Fatal("TryAcquireN(8) refused")
		}
		a6 := startAcquireN(l, 6, "a")
		b1 := startAcquireN(l, 1, "b")
		a1 := startAcquireN(l, 1, "a")
		b2 := startAcquireN(l, 1, "b")
		all.Release()
		synctest.Wait()
		// a6 and b1 fit (7 of 8); the last permit goes to b, which holds 1,
		// not to a, which holds 6 (charged by cost, not by request).
		ps := []ConcurrencyPermit{a6.wantPermits(t, 6), b1.wantPermits(t, 1), b2.wantPermits(t, 1)}
		a1.wantWaiting(t)
		for _, p := range ps {
			p.Release()
		}
		synctest.Wait()
		a1.wantPermits(t, 1).Release()
		if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 || s.Flows != 0 {
			t.Fatalf("Stats() = %+v at the end", s)
		}
	})
}

// TestExecuteCost: Execute takes what Cost says, for as long as next runs.
func TestExecuteCost(t *testing.T) {
	l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 5, Cost: func(ctx context.Context) int {
		f, _ := costFlowKey.Value(ctx)
		if f == "export" {
			return 3
		}
		return 1
	}})
	p, err := NewBuilder[struct{}]().AddStrategy(l).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := costFlowKey.With(context.Background(), "export")
	_, err = p.Execute(ctx, func(context.Context) (struct{}, error) {
		if s := l.Stats(); s.InFlight != 3 {
			t.Errorf("in flight during an export = %d, want 3", s.InFlight)
		}
		_, err := p.Execute(ctx, func(context.Context) (struct{}, error) { return struct{}{}, nil })
		var rej *ConcurrencyLimitRejectedError
		if !errors.As(err, &rej) || rej.Reason != ReasonFull {
			t.Errorf("a second export beside the first = %v, want full", err)
		}
		return struct{}{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.InFlight != 0 {
		t.Fatalf("in flight after = %d", s.InFlight)
	}
}

// costModel is the limiter as the property test sees it: a count, a
// limit and a FIFO of waiters, granted head first while the head fits.
type costModel struct {
	limit, queueLimit int
	inFlight          int
	queue             []*costExec
	all               []*costExec
}

type costExec struct {
	a       *costAcquirer
	cost    int
	state   int // 0 queued, 1 running, 2 released, 3 full, 4 cancelled
	permits int
}

func (m *costModel) need(c int) int { return max(min(c, m.limit), 1) }

func (m *costModel) grant() {
	for len(m.queue) > 0 {
		e := m.queue[0]
		n := m.need(e.cost)
		if m.inFlight+n > m.limit {
			return
		}
		m.queue = m.queue[1:]
		e.state, e.permits = 1, n
		m.inFlight += n
	}
}

func (m *costModel) removeQueued(e *costExec) {
	for i, q := range m.queue {
		if q == e {
			m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
			return
		}
	}
	panic("model: not queued")
}

func (m *costModel) pick(t *rapid.T, state int, label string) *costExec {
	var xs []*costExec
	for _, e := range m.all {
		if e.state == state {
			xs = append(xs, e)
		}
	}
	if len(xs) == 0 {
		t.Skip("no execution in that state")
	}
	return rapid.SampledFrom(xs).Draw(t, label)
}

func (m *costModel) check(t *rapid.T, l *ConcurrencyLimiter) {
	s := l.Stats()
	if s.InFlight != m.inFlight || s.Queued != len(m.queue) || s.Limit != m.limit {
		t.Fatalf("Stats() = %+v, model limit %d, in flight %d, queued %d", s, m.limit, m.inFlight, len(m.queue))
	}
	held := 0
	for _, e := range m.all {
		r, done := e.a.result()
		switch e.state {
		case 0:
			if done {
				t.Fatalf("cost-%d execution returned (%d, %v), model has it queued", e.cost, r.p.Permits(), r.err)
			}
		case 1:
			if !done || r.err != nil || r.p.Permits() != e.permits {
				t.Fatalf("cost-%d execution: done %v, %d permits, %v; model: %d permits", e.cost, done, r.p.Permits(), r.err, e.permits)
			}
			held += e.permits
		case 3:
			var rej *ConcurrencyLimitRejectedError
			if !done || !errors.As(r.err, &rej) || rej.Reason != ReasonFull {
				t.Fatalf("cost-%d execution: done %v, %v; model: full", e.cost, done, r.err)
			}
		case 4:
			if !done || !errors.Is(r.err, context.Canceled) {
				t.Fatalf("cost-%d execution: done %v, %v; model: cancelled", e.cost, done, r.err)
			}
		}
	}
	// The invariant, stated directly: the permits in use are the running
	// executions' costs, and never exceed the limit.
	if held != s.InFlight || s.InFlight > s.Limit {
		t.Fatalf("running executions hold %d permits, the limiter counts %d of %d", held, s.InFlight, s.Limit)
	}
}

// TestAcquireNStateMachine drives a limiter with acquires of random cost
// (0 to above the limit), releases, cancellations and limit raises, and
// checks it against a model of the head-of-line rule after every step:
// the permits in use never exceed the limit, the head of the queue is
// granted as soon as its permits are free and nobody behind it before,
// and at the end every waiter not cancelled has run (a costly one is not
// starved) and every permit is back.
func TestAcquireNStateMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(inBubble{t}, func(t *rapid.T) {
			limit := rapid.IntRange(1, 6).Draw(t, "permits")
			queueLimit := rapid.IntRange(0, 5).Draw(t, "queue")
			l, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{PermitLimit: limit, QueueLimit: queueLimit})
			if err != nil {
				t.Fatal(err)
			}
			m := &costModel{limit: limit, queueLimit: queueLimit}
			defer func() {
				for _, e := range m.all {
					e.a.cancel()
				}
				synctest.Wait()
				for _, e := range m.all {
					if r, _ := e.a.result(); r.err == nil && e.state == 0 {
						r.p.Release()
					}
				}
			}()
			t.Repeat(map[string]func(*rapid.T){
				"arrive": func(t *rapid.T) {
					e := &costExec{cost: rapid.IntRange(0, m.limit+2).Draw(t, "cost")}
					switch n := m.need(e.cost); {
					case len(m.queue) == 0 && m.inFlight+n <= m.limit:
						e.state, e.permits = 1, n
						m.inFlight += n
					case len(m.queue) >= m.queueLimit:
						e.state = 3
					default:
						m.queue = append(m.queue, e)
					}
					m.all = append(m.all, e)
					e.a = startAcquireN(l, e.cost, "")
				},
				"release": func(t *rapid.T) {
					e := m.pick(t, 1, "running")
					e.state = 2
					m.inFlight -= e.permits
					m.grant()
					r, _ := e.a.result()
					r.p.Release()
					synctest.Wait()
				},
				"cancelQueued": func(t *rapid.T) {
					e := m.pick(t, 0, "queued")
					m.removeQueued(e)
					e.state = 4
					m.grant() // it may have been the head holding the others back
					e.a.cancel()
					synctest.Wait()
				},
				"raiseLimit": func(t *rapid.T) {
					m.limit += rapid.IntRange(0, 2).Draw(t, "more")
					m.grant()
					l.SetLimit(m.limit)
					synctest.Wait()
				},
				"": func(t *rapid.T) { m.check(t, l) },
			})
			// Release the running ones one by one: every queued waiter,
			// costly or not, is served in its turn.
			for {
				var running *costExec
				for _, e := range m.all {
					if e.state == 1 {
						running = e
						break
					}
				}
				if running == nil {
					break
				}
				running.state = 2
				m.inFlight -= running.permits
				m.grant()
				r, _ := running.a.result()
				r.p.Release()
				synctest.Wait()
				m.check(t, l)
			}
			if len(m.queue) != 0 {
				t.Fatalf("%d waiters never served", len(m.queue))
			}
			if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 {
				t.Fatalf("after draining: %+v", s)
			}
		})
	})
}

// singleStore is a ratelimit.Store that cannot take several permits at
// once.
type singleStore struct{ ratelimit.Store }

// TestRateLimiterCost: an execution takes its cost from its key's quota,
// all or none; a store that cannot take n at once is refused.
func TestRateLimiterCost(t *testing.T) {
	cost := func(ctx context.Context) int {
		if f, _ := costFlowKey.Value(ctx); f == "export" {
			return 4
		}
		return 1
	}
	l, err := NewRateLimiter(RateLimiterOptions{PermitLimit: 10, Window: time.Hour, Cost: cost})
	if err != nil {
		t.Fatal(err)
	}
	export := costFlowKey.With(context.Background(), "export")
	read := context.Background()
	for i, want := range []struct {
		ctx       context.Context
		allowed   bool
		remaining int
	}{{export, true, 6}, {export, true, 2}, {export, false, 2}, {read, true, 1}, {read, true, 0}, {read, false, 0}} {
		d, err := l.Take(want.ctx, Telemetry{})
		if d.Allowed != want.allowed || d.Remaining != want.remaining {
			t.Fatalf("take %d = %+v, %v; want allowed %v, %d left", i, d, err, want.allowed, want.remaining)
		}
		var rej *RateLimitRejectedError
		if !want.allowed && (!errors.As(err, &rej) || rej.RetryAfter <= 0) {
			t.Fatalf("take %d: refused with %v, want a *RateLimitRejectedError with its wait", i, err)
		}
	}

	_, err = NewRateLimiter(RateLimiterOptions{PermitLimit: 10, Window: time.Hour, Cost: cost, Store: singleStore{ratelimit.NewMemoryStore(0)}})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "RateLimiterOptions.Cost" {
		t.Fatalf("a Cost with a store that takes one at a time: %v, want a *ConfigError for RateLimiterOptions.Cost", err)
	}
}

// TestAcquireNFairStateMachine drives a fair limiter with priorities and
// acquires of random cost, flow and priority, releases and cancellations,
// and checks the invariants without a model of the fair order: the
// running executions hold exactly the permits the limiter counts, never
// more than the limit, and each flow's count is the permits its queued
// grants hold; at the end, releasing what runs serves every waiter not
// cancelled, costly or not, and everything returns to zero.
func TestAcquireNFairStateMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(inBubble{t}, func(t *rapid.T) {
			limit := rapid.IntRange(1, 6).Draw(t, "permits")
			l, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{
				PermitLimit: limit,
				QueueLimit:  rapid.IntRange(1, 6).Draw(t, "queue"),
				Overflow:    rapid.SampledFrom([]OverflowPolicy{OverflowRejectNew, OverflowDropOldest, OverflowDropLowestPriority}).Draw(t, "overflow"),
				Priority:    clPriority,
				Flow:        costFlow,
			})
			if err != nil {
				t.Fatal(err)
			}
			var all []*costAcquirer
			defer func() {
				for _, a := range all {
					a.cancel()
				}
				synctest.Wait()
				for _, a := range all {
					if r, ok := a.result(); ok && r.err == nil && !a.rel {
						r.p.Release()
					}
				}
			}()
			running := func() []*costAcquirer {
				var xs []*costAcquirer
				for _, a := range all {
					if r, ok := a.result(); ok && r.err == nil && !a.rel {
						xs = append(xs, a)
					}
				}
				return xs
			}
			check := func(t *rapid.T) {
				s := l.Stats()
				held := 0
				for _, a := range running() {
					r, _ := a.result()
					held += r.p.Permits()
				}
				if held != s.InFlight || s.InFlight > s.Limit {
					t.Fatalf("running executions hold %d permits, the limiter counts %+v", held, s)
				}
			}
			t.Repeat(map[string]func(*rapid.T){
				"arrive": func(t *rapid.T) {
					cost := rapid.IntRange(0, limit+2).Draw(t, "cost")
					flow := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "flow")
					prio := rapid.IntRange(0, 2).Draw(t, "priority")
					ctx, cancel := context.WithCancel(clPriorityKey.With(costFlowKey.With(context.Background(), flow), prio))
					a := &costAcquirer{cost: cost, cancel: cancel, done: make(chan costResult, 1)}
					go func() {
						p, err := l.AcquireN(ctx, cost)
						a.done <- costResult{p, err}
					}()
					synctest.Wait()
					all = append(all, a)
				},
				"release": func(t *rapid.T) {
					xs := running()
					if len(xs) == 0 {
						t.Skip("nothing running")
					}
					a := rapid.SampledFrom(xs).Draw(t, "running")
					r, _ := a.result()
					a.rel = true
					r.p.Release()
					synctest.Wait()
				},
				"cancel": func(t *rapid.T) {
					var xs []*costAcquirer
					for _, a := range all {
						if _, ok := a.result(); !ok {
							xs = append(xs, a)
						}
					}
					if len(xs) == 0 {
						t.Skip("nobody queued")
					}
					a := rapid.SampledFrom(xs).Draw(t, "queued")
					a.cancel()
					synctest.Wait()
				},
				"": check,
			})
			for xs := running(); len(xs) > 0; xs = running() {
				r, _ := xs[0].result()
				xs[0].rel = true
				r.p.Release()
				synctest.Wait()
				check(t)
			}
			for _, a := range all {
				if _, ok := a.result(); !ok {
					t.Fatalf("a cost-%d waiter was never served", a.cost)
				}
			}
			if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 || s.Flows != 0 {
				t.Fatalf("after draining: %+v", s)
			}
		})
	})
}

// AllowKeyN needs a store that takes n at once; one permit goes through
// any store. The zero limiter refuses costly acquires as it refuses
// every other.
func TestCostEdges(t *testing.T) {
	l, err := NewRateLimiter(RateLimiterOptions{PermitLimit: 5, Window: time.Hour, Store: singleStore{ratelimit.NewMemoryStore(0)}})
	if err != nil {
		t.Fatal(err)
	}
	var ce *ConfigError
	if _, err := l.AllowKeyN(context.Background(), "k", 3); !errors.As(err, &ce) || ce.Field != "RateLimiterOptions.Store" {
		t.Fatalf("AllowKeyN(3) through a store of single takes: %v, want a *ConfigError for RateLimiterOptions.Store", err)
	}
	if d, err := l.AllowKeyN(context.Background(), "k", 1); err != nil || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("AllowKeyN(1) = %+v, %v", d, err)
	}
	var zero ConcurrencyLimiter
	if _, ok := zero.TryAcquireN(3); ok {
		t.Fatal("the zero limiter's TryAcquireN admitted")
	}
	var rej *ConcurrencyLimitRejectedError
	if _, err := zero.AcquireN(context.Background(), 3); !errors.As(err, &rej) || rej.Reason != ReasonFull {
		t.Fatalf("the zero limiter's AcquireN: %v, want full", err)
	}
}
