package resilience

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"
)

// fxState is one execution of the fairness state machine as the test
// sees it.
type fxState int

const (
	fxQueued   fxState = iota
	fxRunning          // in next
	fxFinished         // next returned, or the execution was rejected
)

type fx struct {
	seq     int
	flow    string
	ctx     context.Context
	cancel  context.CancelFunc
	release chan struct{}
	done    chan error
	state   fxState
	fromQ   bool // granted from the queue: its permit counts to its flow
	err     error
	entered bool
}

type fxFlowKey struct{}

func fxFlow(ctx context.Context) string { return ctx.Value(fxFlowKey{}).(string) }

// TestFairLimiterStateMachine drives a limiter with a Flow function with
// random arrivals of a noisy flow and quiet ones, releases, cancellations
// and queue timeouts, under every overflow policy, with and without
// CoDel, and checks after every step:
//
//   - no permit is lost or granted twice: Stats' in flight and queued are
//     the executions in next and waiting, each execution enters next at
//     most once, and everything returns to zero, flows included;
//   - a flow's executions are granted in arrival order (FIFO within a
//     flow);
//   - a freed permit goes to a flow that holds no more permits from the
//     queue than any other flow waiting, so a waiting quiet flow is
//     passed over only by flows holding at most its share;
//   - a full queue sheds from a flow that uses at least as much (waiters
//     and permits from the queue) as the newcomer's, the newcomer
//     counted, and rejects the newcomer only when no other flow uses
//     more (under drop-oldest, as much).
func TestFairLimiterStateMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(inBubble{t}, func(t *rapid.T) {
			opts := ConcurrencyLimiterOptions{
				PermitLimit: rapid.IntRange(1, 4).Draw(t, "permits"),
				QueueLimit:  rapid.IntRange(1, 6).Draw(t, "queue"),
				Overflow:    rapid.SampledFrom([]OverflowPolicy{OverflowRejectNew, OverflowDropOldest, OverflowDropLowestPriority}).Draw(t, "overflow"),
				Flow:        fxFlow,
			}
			if rapid.Bool().Draw(t, "queueTimeout") {
				opts.QueueTimeout = time.Duration(rapid.IntRange(1, 5).Draw(t, "timeoutSeconds")) * time.Second
			}
			codel := rapid.Bool().Draw(t, "codel")
			if codel {
				opts.CoDel = &CoDelOptions{Interval: time.Second, Target: 500 * time.Millisecond}
			}
			l, err := NewConcurrencyLimiter(opts)
			if err != nil {
				t.Fatal(err)
			}
			var all []*fx
			entered := make(chan int, 1024)
			defer func() {
				for _, e := range all {
					e.cancel()
					if e.state == fxRunning {
						close(e.release)
					}
				}
				synctest.Wait()
			}()
			heldQ := func(flow string) int {
				n := 0
				for _, e := range all {
					if e.state == fxRunning && e.fromQ && e.flow == flow {
						n++
					}
				}
				return n
			}
			queuedOf := func(flow string) []*fx {
				var q []*fx
				for _, e := range all {
					if e.state == fxQueued && e.flow == flow {
						q = append(q, e)
					}
				}
				return q
			}
			waitingFlows := func() map[string]bool {
				f := map[string]bool{}
				for _, e := range all {
					if e.state == fxQueued {
						f[e.flow] = true
					}
				}
				return f
			}

			// settle waits for the goroutines, then applies what happened:
			// grants (checked for FIFO and fairness against the state
			// before) and endings.
			settle := func(t *rapid.T) {
				synctest.Wait()
				before := waitingFlows()
				held := map[string]int{}
				for f := range before {
					held[f] = heldQ(f)
				}
				var granted []*fx
				for drained := false; !drained; {
					select {
					case seq := <-entered:
						e := all[seq]
						if e.entered {
							t.Fatalf("execution %d entered next twice", seq)
						}
						e.entered = true
						if e.state == fxQueued {
							granted = append(granted, e)
						}
					default:
						drained = true
					}
				}
				// Endings first: a CoDel purge in the same step may have
				// ended waiters before the grant.
				for _, e := range all {
					if e.state != fxQueued || e.entered {
						continue
					}
					select {
					case err := <-e.done:
						e.err, e.state = err, fxFinished
						if err == nil {
							t.Fatalf("execution %d succeeded without entering next", e.seq)
						}
					default:
					}
				}
				for _, e := range granted {
					for _, o := range queuedOf(e.flow) {
						if o.seq < e.seq && !o.entered {
							t.Fatalf("execution %d of flow %s granted before %d, queued earlier", e.seq, e.flow, o.seq)
						}
					}
					for f := range waitingFlows() {
						if f != e.flow && before[f] && held[e.flow] > held[f] {
							t.Fatalf("a permit went to flow %s holding %d while flow %s waited holding %d", e.flow, held[e.flow], f, held[f])
						}
					}
				}
				for _, e := range granted {
					e.state, e.fromQ = fxRunning, true
					held[e.flow]++
				}
			}

			t.Repeat(map[string]func(*rapid.T){
				"arrive": func(t *rapid.T) {
					flow := "noisy"
					if rapid.IntRange(0, 3).Draw(t, "quiet") > 0 && rapid.Bool().Draw(t, "isQuiet") {
						flow = fmt.Sprintf("quiet-%d", rapid.IntRange(1, 3).Draw(t, "which"))
					}
					s := l.Stats()
					ctx, cancel := context.WithCancel(context.WithValue(context.Background(), fxFlowKey{}, flow))
					e := &fx{seq: len(all), flow: flow, ctx: ctx, cancel: cancel, release: make(chan struct{}), done: make(chan error, 1)}
					all = append(all, e)
					queuedBefore := map[string]int{}
					for _, o := range all {
						if o.state == fxQueued && o != e {
							queuedBefore[o.flow]++
						}
					}
					go func() {
						e.done <- l.Execute(ctx, Telemetry{}, func(context.Context) error {
							entered <- e.seq
							<-e.release
							return nil
						})
					}()
					synctest.Wait()
					if s.InFlight < s.Limit {
						// A free permit: taken at once, not counted to a flow.
						select {
						case seq := <-entered:
							if seq != e.seq {
								t.Fatalf("execution %d entered when %d arrived", seq, e.seq)
							}
							e.entered, e.state = true, fxRunning
						default:
							t.Fatalf("execution %d did not run with a permit free (%+v)", e.seq, s)
						}
						return
					}
					settle(t)
					var full *ConcurrencyLimitRejectedError
					if e.state == fxFinished && errors.As(e.err, &full) && full.Reason == ReasonFull {
						// Rejected: no other flow used more (under drop-oldest,
						// as much: a tie queues the newcomer). The queue is as
						// the limiter saw it: a rejection changes nothing.
						eu := len(queuedOf(e.flow)) + heldQ(e.flow) + 1
						for f := range waitingFlows() {
							if ou := len(queuedOf(f)) + heldQ(f); f != e.flow && (ou > eu || ou == eu && opts.Overflow == OverflowDropOldest) {
								t.Fatalf("a newcomer of flow %s (using %d with it) was rejected while flow %s used %d", e.flow, eu, f, ou)
							}
						}
					}
					for _, o := range all {
						var br *ConcurrencyLimitRejectedError
						if o != e && o.state == fxFinished && errors.As(o.err, &br) && br.Reason == ReasonDropped && o.done != nil {
							if ou, eu := queuedBefore[o.flow]+heldQ(o.flow), queuedBefore[e.flow]+heldQ(e.flow)+1; ou < eu && o.flow != e.flow {
								t.Fatalf("flow %s (using %d) lost a waiter to a newcomer of flow %s (using %d with it)", o.flow, ou, e.flow, eu)
							}
							o.done = nil // checked once
						}
					}
				},
				"release": func(t *rapid.T) {
					var running []*fx
					for _, e := range all {
						if e.state == fxRunning {
							running = append(running, e)
						}
					}
					if len(running) == 0 {
						t.Skip("nothing running")
					}
					e := rapid.SampledFrom(running).Draw(t, "running")
					close(e.release)
					synctest.Wait()
					select {
					case err := <-e.done:
						e.err, e.state = err, fxFinished
						e.done = nil
					default:
						t.Fatalf("execution %d did not return once released", e.seq)
					}
					settle(t)
				},
				"cancelQueued": func(t *rapid.T) {
					var q []*fx
					for _, e := range all {
						if e.state == fxQueued {
							q = append(q, e)
						}
					}
					if len(q) == 0 {
						t.Skip("nobody queued")
					}
					rapid.SampledFrom(q).Draw(t, "queued").cancel()
					settle(t)
				},
				"sleep": func(t *rapid.T) {
					time.Sleep(time.Duration(rapid.IntRange(1, 3).Draw(t, "sleepSeconds")) * time.Second)
					settle(t)
				},
				"": func(t *rapid.T) {
					s := l.Stats()
					running, queued := 0, 0
					flows := map[string]bool{}
					for _, e := range all {
						switch e.state {
						case fxRunning:
							running++
							if e.fromQ {
								flows[e.flow] = true
							}
						case fxQueued:
							queued++
							flows[e.flow] = true
						}
					}
					if s.InFlight != running || s.Queued != queued || s.Flows != len(flows) {
						t.Fatalf("Stats %+v; the test sees %d running, %d queued, %d flows", s, running, queued, len(flows))
					}
					if s.Queued > 0 && s.InFlight < s.Limit {
						t.Fatalf("waiters queued beside a free permit: %+v", s)
					}
				},
			})

			// Nothing is lost: drain everything.
			for _, e := range all {
				if e.state == fxQueued {
					e.cancel()
				}
			}
			settle(t)
			for _, e := range all {
				if e.state == fxRunning {
					close(e.release)
					e.state = fxFinished
				}
			}
			synctest.Wait()
			if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 || s.Flows != 0 {
				t.Fatalf("after draining: %+v", s)
			}
		})
	})
}
