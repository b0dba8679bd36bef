package resilience

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"pgregory.net/rapid"
)

// rcExec is one Acquire running on its own goroutine in the bubble.
type rcExec struct {
	cancel context.CancelFunc
	done   chan error // the one result of Acquire
	result error
	ended  bool // Acquire returned
	ran    bool // admitted and not yet released
	freed  bool // released, or never admitted
}

// TestReconfigureRapid drives a ConcurrencyLimiter with random arrivals,
// releases, cancellations and live reconfigurations (permit limit, queue
// size, overflow) and checks after every step, once the bubble is idle:
//
//   - every Acquire returns exactly once;
//   - a step that admitted anyone leaves in flight at most the limit in
//     force (an admission happens only below it; a lower limit lets the
//     running finish: invariant 1 of docs/DESIGN.md);
//   - in flight equals the executions holding a permit, and queued the
//     ones still waiting (nothing lost or granted twice: invariants 2, 3);
//   - the queue never holds more than the queue limit in force, and a
//     shrink's excess is rejected with ReasonDropped, one rejection per
//     waiter it removed;
//   - a waiter stays queued only while no permit is free;
//   - at the end, with everything released or cancelled, in flight and
//     queued are zero.
func TestReconfigureRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		synctest.Test(t, func(t *testing.T) { reconfigureRun(rt) })
	})
}

func reconfigureRun(rt *rapid.T) {
	opts := ConcurrencyLimiterOptions{
		PermitLimit: rapid.IntRange(1, 4).Draw(rt, "limit"),
		QueueLimit:  rapid.IntRange(0, 4).Draw(rt, "queue"),
		Priority:    func(ctx context.Context) int { return priorityOf(ctx) },
	}
	l, err := NewConcurrencyLimiter(opts)
	if err != nil {
		rt.Fatal(err)
	}
	var execs []*rcExec
	settle := func() (admitted, dropped int) {
		synctest.Wait()
		for _, e := range execs {
			if e.ended {
				continue
			}
			select {
			case err := <-e.done:
				e.ended, e.result = true, err
				if err == nil {
					e.ran = true
					admitted++
				} else {
					e.freed = true
					if errors.Is(err, errLimitDropped) {
						dropped++
					}
				}
			default:
			}
		}
		return admitted, dropped
	}
	check := func(step string, admitted int) {
		s := l.Stats()
		running, waiting := 0, 0
		for _, e := range execs {
			switch {
			case e.ran:
				running++
			case !e.ended:
				waiting++
			}
		}
		if s.InFlight != running || s.Queued != waiting {
			rt.Fatalf("%s: stats %+v, but %d hold a permit and %d wait", step, s, running, waiting)
		}
		if admitted > 0 && s.InFlight > s.Limit {
			rt.Fatalf("%s: admitted %d with %d in flight over the limit %d", step, admitted, s.InFlight, s.Limit)
		}
		if s.Queued > opts.QueueLimit {
			rt.Fatalf("%s: %d queued over the queue limit %d", step, s.Queued, opts.QueueLimit)
		}
		if s.Queued > 0 && s.InFlight < s.Limit {
			rt.Fatalf("%s: %d waiting while a permit is free (%+v)", step, s.Queued, s)
		}
	}
	steps := rapid.IntRange(1, 40).Draw(rt, "steps")
	for i := range steps {
		switch rapid.IntRange(0, 3).Draw(rt, "action") {
		case 0: // arrive
			p := rapid.IntRange(0, 2).Draw(rt, "priority")
			ctx, cancel := context.WithCancel(withPriority(context.Background(), p))
			e := &rcExec{cancel: cancel, done: make(chan error, 1)}
			execs = append(execs, e)
			go func() { _, err := l.Acquire(ctx); e.done <- err }()
			admitted, _ := settle()
			check("arrive", admitted)
		case 1: // release one running
			if e := pick(rt, execs, func(e *rcExec) bool { return e.ran }); e != nil {
				e.ran, e.freed = false, true
				l.Release()
				e.cancel()
			}
			admitted, _ := settle()
			check("release", admitted)
		case 2: // cancel one waiting
			if e := pick(rt, execs, func(e *rcExec) bool { return !e.ended }); e != nil {
				e.cancel()
			}
			admitted, _ := settle()
			check("cancel", admitted)
		case 3: // reconfigure
			before := l.Stats()
			next := opts
			next.PermitLimit = rapid.IntRange(1, 5).Draw(rt, "newLimit")
			next.QueueLimit = rapid.IntRange(0, 5).Draw(rt, "newQueue")
			next.Overflow = rapid.SampledFrom([]OverflowPolicy{"", OverflowRejectNew, OverflowDropOldest}).Draw(rt, "overflow")
			if err := l.Reconfigure(next); err != nil {
				rt.Fatalf("step %d: %v", i, err)
			}
			opts = next
			admitted, dropped := settle()
			check("reconfigure", admitted)
			if after := l.Stats(); before.Queued-after.Queued != admitted+dropped {
				rt.Fatalf("reconfigure: queue %d -> %d with %d admitted and %d dropped", before.Queued, after.Queued, admitted, dropped)
			}
			if want := max(0, before.Queued-next.QueueLimit); dropped != want {
				rt.Fatalf("reconfigure: %d dropped, want the excess %d", dropped, want)
			}
		}
	}
	// Everything ends: waiters leave, holders release.
	for _, e := range execs {
		if !e.ended {
			e.cancel()
		}
	}
	settle()
	for _, e := range execs {
		if e.ran {
			e.ran = false
			l.Release()
		}
		e.cancel()
	}
	settle()
	for _, e := range execs {
		if !e.ended {
			rt.Fatal("an Acquire never returned")
		}
		select {
		case <-e.done:
			rt.Fatal("an Acquire returned twice")
		default:
		}
	}
	if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 {
		rt.Fatalf("at the end: %+v", s)
	}
}

func pick(rt *rapid.T, execs []*rcExec, ok func(*rcExec) bool) *rcExec {
	var c []*rcExec
	for _, e := range execs {
		if ok(e) {
			c = append(c, e)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[rapid.IntRange(0, len(c)-1).Draw(rt, "pick")]
}

type priorityKey struct{}

func withPriority(ctx context.Context, p int) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

func priorityOf(ctx context.Context) int {
	p, _ := ctx.Value(priorityKey{}).(int)
	return p
}
