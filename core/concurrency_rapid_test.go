package resilience

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"
)

// clOutcome is what the model expects of one Acquire.
type clOutcome int

const (
	clQueued clOutcome = iota
	clRunning
	clReleased // ran and gave its permit back
	clFull
	clDropped
	clQueueTimeout
	clCancelled
)

// clModelExec is one execution as the model sees it, with the real Acquire
// running on its own goroutine.
type clModelExec struct {
	a        *clAcquirer
	priority int
	seq      int
	deadline time.Time // queue timeout, zero if none
	outcome  clOutcome
}

// clModel is a plain, obviously correct description of the limiter: a
// count, a limit and a slice of waiters in arrival order.
type clModel struct {
	opts     ConcurrencyLimiterOptions
	limit    int
	inFlight int
	queue    []*clModelExec // arrival order
	all      []*clModelExec
	seq      int
}

func (m *clModel) best() int {
	b := -1
	for i, e := range m.queue {
		if b < 0 || e.priority < m.queue[b].priority {
			b = i
		}
	}
	return b
}

func (m *clModel) removeAt(i int) *clModelExec {
	e := m.queue[i]
	m.queue = append(m.queue[:i], m.queue[i+1:]...)
	return e
}

func (m *clModel) remove(e *clModelExec) {
	for i, q := range m.queue {
		if q == e {
			m.removeAt(i)
			return
		}
	}
	panic("model: not queued")
}

func (m *clModel) grant() {
	for m.inFlight < m.limit && len(m.queue) > 0 {
		m.removeAt(m.best()).outcome = clRunning
		m.inFlight++
	}
}

// arrive predicts what Acquire does for a newcomer of priority p.
func (m *clModel) arrive(e *clModelExec, now time.Time) {
	switch {
	case m.inFlight < m.limit:
		e.outcome = clRunning
		m.inFlight++
		return
	case m.opts.QueueLimit == 0:
		e.outcome = clFull
		return
	case len(m.queue) >= m.opts.QueueLimit:
		victim := -1
		overflow := m.opts.Overflow
		if overflow == "" && m.opts.Priority != nil {
			overflow = OverflowDropLowestPriority // the default with priorities
		}
		switch overflow {
		case OverflowDropOldest:
			victim = 0
		case OverflowDropLowestPriority:
			low := 0
			for i, q := range m.queue {
				if q.priority >= m.queue[low].priority {
					low = i
				}
			}
			if e.priority < m.queue[low].priority {
				victim = low
			}
		}
		if victim < 0 {
			e.outcome = clFull
			return
		}
		m.removeAt(victim).outcome = clDropped
	}
	e.outcome = clQueued
	if m.opts.QueueTimeout > 0 {
		e.deadline = now.Add(m.opts.QueueTimeout)
	}
	m.queue = append(m.queue, e)
}

func (m *clModel) pick(t *rapid.T, outcome clOutcome, label string) *clModelExec {
	var xs []*clModelExec
	for _, e := range m.all {
		if e.outcome == outcome {
			xs = append(xs, e)
		}
	}
	if len(xs) == 0 {
		t.Skip("no execution in that state")
	}
	return rapid.SampledFrom(xs).Draw(t, label)
}

// check compares the real limiter and every Acquire result with the model.
func (m *clModel) check(t *rapid.T, l *ConcurrencyLimiter) {
	if got, want := l.Stats(), (LimiterStats{Limit: m.limit, InFlight: m.inFlight, Queued: len(m.queue)}); got != want {
		t.Fatalf("Stats() = %+v, model %+v", got, want)
	}
	for _, e := range m.all {
		err, done := e.a.result()
		switch e.outcome {
		case clQueued:
			if done {
				t.Fatalf("execution %d returned %v, model has it queued", e.seq, err)
			}
			continue
		case clRunning, clReleased:
			if !done || err != nil {
				t.Fatalf("execution %d: done=%v err=%v, model has it granted", e.seq, done, err)
			}
			continue
		}
		if !done {
			t.Fatalf("execution %d still waiting, model expects outcome %d", e.seq, e.outcome)
		}
		var br *ConcurrencyLimitRejectedError
		isReason := func(r RejectReason) bool { return errors.As(err, &br) && br.Reason == r }
		ok := false
		switch e.outcome {
		case clFull:
			ok = isReason(ReasonFull)
		case clDropped:
			ok = isReason(ReasonDropped)
		case clQueueTimeout:
			ok = isReason(ReasonQueueTimeout)
		case clCancelled:
			ok = errors.Is(err, context.Canceled)
		}
		if !ok {
			t.Fatalf("execution %d returned %v, model expects outcome %d", e.seq, err, e.outcome)
		}
	}
}

// inBubble hides that t is a *testing.T from rapid, which would otherwise
// ask for t.Deadline, a call synctest bubbles forbid.
type inBubble struct{ testing.TB }

// TestConcurrencyLimiterStateMachine drives a limiter with random acquires,
// releases, cancellations (also at the moment of a grant), queue timeouts,
// evictions and limit changes, and after every step checks it against the
// model. That covers docs/DESIGN.md invariants 1-3: in flight never exceeds the
// limit except after a decrease, where it only falls; a permit or queue
// place is never lost (everything returns to zero at the end); a waiter
// cancelled while being granted either runs or hands on, never both, never
// neither.
func TestConcurrencyLimiterStateMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(inBubble{t}, func(t *rapid.T) {
			opts := ConcurrencyLimiterOptions{
				PermitLimit: rapid.IntRange(1, 3).Draw(t, "permits"),
				QueueLimit:  rapid.IntRange(0, 4).Draw(t, "queue"),
				Overflow:    rapid.SampledFrom([]OverflowPolicy{"", OverflowRejectNew, OverflowDropOldest, OverflowDropLowestPriority}).Draw(t, "overflow"),
			}
			if rapid.Bool().Draw(t, "queueTimeout") {
				opts.QueueTimeout = time.Duration(rapid.IntRange(1, 5).Draw(t, "timeoutSeconds")) * time.Second
			}
			usePriority := rapid.Bool().Draw(t, "priority")
			if usePriority {
				opts.Priority = clPriority
			}
			l, err := NewConcurrencyLimiter(opts)
			if err != nil {
				t.Fatal(err)
			}
			m := &clModel{opts: opts, limit: opts.PermitLimit}
			if m.opts.QueueLimit == 0 {
				m.opts.QueueTimeout = 0
			}
			// Whatever happens, leave no goroutine blocked in the bubble.
			defer func() {
				for _, e := range m.all {
					e.a.cancel()
				}
				synctest.Wait()
			}()

			newExec := func(t *rapid.T) *clModelExec {
				p := 0
				if usePriority {
					p = rapid.IntRange(0, 3).Draw(t, "p")
				}
				m.seq++
				return &clModelExec{priority: p, seq: m.seq}
			}
			prevInFlight := 0
			t.Repeat(map[string]func(*rapid.T){
				"arrive": func(t *rapid.T) {
					e := newExec(t)
					m.arrive(e, time.Now())
					m.all = append(m.all, e)
					e.a = startAcquire(l, e.priority)
				},
				"arriveDone": func(t *rapid.T) {
					e := newExec(t)
					ctx, cancel := context.WithCancel(clPriorityKey.With(context.Background(), e.priority))
					cancel()
					e.a = &clAcquirer{ctx: ctx, cancel: cancel, done: make(chan error, 1)}
					e.a.done <- acquireErr(l, ctx)
					e.outcome = clCancelled
					m.all = append(m.all, e)
				},
				"release": func(t *rapid.T) {
					e := m.pick(t, clRunning, "running")
					e.outcome = clReleased
					m.inFlight--
					m.grant()
					l.Release()
					synctest.Wait()
				},
				"cancelQueued": func(t *rapid.T) {
					e := m.pick(t, clQueued, "queued")
					m.remove(e)
					e.outcome = clCancelled
					e.a.cancel()
					synctest.Wait()
				},
				"cancelAsGranted": func(t *rapid.T) {
					// A release and a waiter's cancellation in one critical
					// section: the waiter may be granted and find its
					// context done when it wakes.
					w := m.pick(t, clQueued, "queued")
					r := m.pick(t, clRunning, "running")
					m.remove(w)
					w.outcome = clCancelled
					r.outcome = clReleased
					m.inFlight--
					m.grant()
					l.engine.Lock()
					w.a.cancel()
					l.engine.ReleaseLocked()
					l.engine.Unlock()
					synctest.Wait()
				},
				"sleep": func(t *rapid.T) {
					d := time.Duration(rapid.IntRange(1, 3).Draw(t, "sleepSeconds")) * time.Second
					time.Sleep(d)
					now := time.Now()
					for _, e := range append([]*clModelExec(nil), m.queue...) {
						if !e.deadline.IsZero() && !e.deadline.After(now) {
							m.remove(e)
							e.outcome = clQueueTimeout
						}
					}
					synctest.Wait()
				},
				"setLimit": func(t *rapid.T) {
					n := rapid.IntRange(-1, 4).Draw(t, "limit")
					m.limit = max(n, 1)
					m.grant()
					l.SetLimit(n)
					synctest.Wait()
				},
				"": func(t *rapid.T) {
					m.check(t, l)
					s := l.Stats()
					// Invariant 1, stated directly.
					if s.InFlight > s.Limit && s.InFlight > prevInFlight {
						t.Fatalf("in flight rose to %d above the limit %d", s.InFlight, s.Limit)
					}
					if s.Queued > 0 && s.InFlight < s.Limit {
						t.Fatalf("waiters queued beside a free permit: %+v", s)
					}
					prevInFlight = s.InFlight
				},
			})

			// Invariant 2: drain everything; nothing is lost.
			for _, e := range append([]*clModelExec(nil), m.queue...) {
				m.remove(e)
				e.outcome = clCancelled
				e.a.cancel()
			}
			synctest.Wait()
			for _, e := range m.all {
				if e.outcome == clRunning {
					e.outcome = clReleased
					m.inFlight--
					l.Release()
				}
			}
			m.check(t, l)
			if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 {
				t.Fatalf("after draining: %+v", s)
			}
		})
	})
}
