package resilience

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/internal/fair"
)

// A FlowWeight needs a Flow: the configuration error names the field, for
// both limiters.
func TestFlowWeightWithoutFlowIsAConfigError(t *testing.T) {
	w := func(context.Context) int { return 2 }
	_, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, FlowWeight: w})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "ConcurrencyLimiterOptions.FlowWeight" {
		t.Fatalf("fixed: %v, want a *ConfigError for ConcurrencyLimiterOptions.FlowWeight", err)
	}
	_, err = NewAdaptiveLimiter(AdaptiveLimiterOptions{QueueLimit: 1, FlowWeight: w})
	if !errors.As(err, &ce) || ce.Field != "AdaptiveLimiterOptions.FlowWeight" {
		t.Fatalf("adaptive: %v, want a *ConfigError for AdaptiveLimiterOptions.FlowWeight", err)
	}
}

// fairHold runs executions of the given flows through Execute, each
// holding its permit until release is closed, and returns when every one
// has either entered or queued.
func fairHold(t *testing.T, s Strategy, release chan struct{}, flows ...string) {
	t.Helper()
	for _, f := range flows {
		ctx := context.WithValue(context.Background(), fxFlowKey{}, f)
		go func() {
			_ = s.Execute(ctx, Telemetry{}, func(context.Context) error {
				<-release
				return nil
			})
		}()
		synctest.Wait()
	}
}

// Weights: a flow of weight 2 is granted until it holds twice the permits
// of a flow of weight 1, and Stats report the active flows and the
// largest one's share of the permits in flight; once everything is
// released no flow is left.
func TestFlowWeightsShareThePermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, ConcurrencyLimiterOptions{PermitLimit: 6, QueueLimit: 20, Flow: fxFlow,
			FlowWeight: func(ctx context.Context) int {
				if fxFlow(ctx) == "gold" {
					return 2
				}
				return 1
			}})
		first := make(chan struct{})
		fairHold(t, l, first, "x", "x", "x", "x", "x", "x") // free permits: not counted to a flow
		rest := make(chan struct{})
		fairHold(t, l, rest, "gold", "gold", "gold", "gold", "gold", "plain", "plain", "plain", "plain", "plain")
		if s := l.Stats(); s.InFlight != 6 || s.Queued != 10 || s.Flows != 2 || s.LargestFlowShare != 0 {
			t.Fatalf("before the grants: %+v", s)
		}
		close(first) // six permits pass to the queue
		synctest.Wait()
		l.engine.Lock()
		gold, plain := l.engine.FlowHeldLocked("gold"), l.engine.FlowHeldLocked("plain")
		l.engine.Unlock()
		if gold != 4 || plain != 2 {
			t.Fatalf("gold (weight 2) holds %d, plain (weight 1) %d; want 4 and 2", gold, plain)
		}
		if s := l.Stats(); s.Flows != 2 || s.LargestFlowShare < 0.66 || s.LargestFlowShare > 0.67 {
			t.Fatalf("after the grants: %+v, want 2 flows and the largest holding 4 of 6", s)
		}
		close(rest)
		synctest.Wait()
		if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 || s.Flows != 0 {
			t.Fatalf("after everything returned: %+v", s)
		}
	})
}

// The adaptive limiter's permits from the queue are counted to their flow
// through Acquire too (the AdaptivePermit carries it), and their release
// gives it back.
func TestAdaptiveAcquireCountsTheFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := mustAdaptive(t, AdaptiveLimiterOptions{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, QueueLimit: 2, Flow: fxFlow, IgnoreCPUWait: true})
		held, err := a.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan AdaptivePermit, 1)
		go func() {
			p, err := a.Acquire(context.WithValue(context.Background(), fxFlowKey{}, "t"))
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		synctest.Wait()
		if err := held.Release(LimitIgnored); err != nil {
			t.Fatal(err)
		}
		p := <-got
		if s := a.Stats(); s.Flows != 1 || s.LargestFlowShare != 1 {
			t.Fatalf("with the queued permit held: %+v, want its flow active", s)
		}
		if err := p.Release(LimitIgnored); err != nil {
			t.Fatal(err)
		}
		if s := a.Stats(); s.Flows != 0 || s.InFlight != 0 {
			t.Fatalf("after its release: %+v", s)
		}
	})
}

// A Flow or FlowWeight function that panics is reported as event.HookPanic
// naming it, the panic reaches that execution's caller, and the limiter
// keeps no queue place or flow for it.
func TestFlowHookPanicIsReported(t *testing.T) {
	for _, hook := range []string{event.HookFlow, event.HookFlowWeight} {
		t.Run(hook, func(t *testing.T) {
			var events []event.Event
			tel := NewTelemetry("p", "s", event.ListenerFunc(func(_ context.Context, e event.Event) {
				if e.Name == event.HookPanic {
					events = append(events, e)
				}
			}))
			o := ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, Flow: func(context.Context) string { return "f" }}
			if hook == event.HookFlow {
				o.Flow = func(context.Context) string { panic(hook) }
			} else {
				o.FlowWeight = func(context.Context) int { panic(hook) }
			}
			l := newTestLimiter(t, o)
			if _, ok := l.TryAcquire(); !ok {
				t.Fatal("no free permit")
			}
			if v := recovered(func() { _ = l.Execute(context.Background(), tel, func(context.Context) error { return nil }) }); v != hook {
				t.Fatalf("recovered %v, want the hook's panic", v)
			}
			var hp *HookPanicError
			if len(events) != 1 || events[0].Reason != hook || !errors.As(events[0].Err, &hp) || hp.Hook != hook {
				t.Fatalf("events %+v, want one HookPanic for %s", events, hook)
			}
			if s := l.Stats(); s.InFlight != 1 || s.Queued != 0 || s.Flows != 0 {
				t.Fatalf("stats %+v, want the held permit alone", s)
			}
		})
	}
}

// fairRun starts one execution of flow through Execute, holding its
// permit until release is closed, and waits until it has entered, queued
// or returned; its error arrives on the channel returned.
func fairRun(l *ConcurrencyLimiter, release chan struct{}, flow string) chan error {
	done := make(chan error, 1)
	ctx := context.WithValue(context.Background(), fxFlowKey{}, flow)
	go func() {
		done <- l.Execute(ctx, Telemetry{}, func(context.Context) error {
			<-release
			return nil
		})
	}()
	synctest.Wait()
	return done
}

// A full queue sheds from the flow that uses the most, its permits from
// the queue counted with its waiters, under every overflow policy and
// with CoDel: a newcomer of a flow that holds a permit and has no waiter
// does not evict a quieter flow's waiter. Under drop-oldest it once did:
// the newcomer's flow was weighed only when it had a waiter at the
// newcomer's priority (the property test's seed 7288191071753587798). On
// a tie, drop-oldest queues the newcomer and the other policies reject
// it.
func TestFairShedCountsTheNewcomersPermits(t *testing.T) {
	for _, overflow := range []OverflowPolicy{OverflowRejectNew, OverflowDropOldest, OverflowDropLowestPriority} {
		for _, codel := range []bool{false, true} {
			for _, tie := range []bool{false, true} {
				name := fmt.Sprintf("%s/codel=%t/tie=%t", overflow, codel, tie)
				t.Run(name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						testFairShedCountsPermits(t, overflow, codel, tie)
					})
				})
			}
		}
	}
}

func testFairShedCountsPermits(t *testing.T, overflow OverflowPolicy, codel, tie bool) {
	opts := ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 2, Overflow: overflow, Flow: fxFlow}
	if codel {
		opts.CoDel = &CoDelOptions{Interval: time.Second, Target: 500 * time.Millisecond}
	}
	l := newTestLimiter(t, opts)
	first, rest := make(chan struct{}), make(chan struct{})
	fairRun(l, first, "x") // the free permit: not counted to a flow
	fairRun(l, rest, "noisy")
	close(first) // noisy's waiter takes the permit from the queue
	synctest.Wait()
	// The queue fills: two quiet flows using 1 each, or, for the tie, one
	// using 2 as noisy will with its newcomer.
	quiet := []string{"quiet-1", "quiet-2"}
	if tie {
		quiet = []string{"quiet-1", "quiet-1"}
	}
	var waiting []chan error
	for _, f := range quiet {
		waiting = append(waiting, fairRun(l, rest, f))
	}
	if s := l.Stats(); s.InFlight != 1 || s.Queued != 2 {
		t.Fatalf("before the newcomer: %+v, want noisy running and two waiters", s)
	}
	newcomer := fairRun(l, rest, "noisy")

	var rej *ConcurrencyLimitRejectedError
	if tie && overflow == OverflowDropOldest {
		// quiet-1's oldest waiter goes; the newcomer queues behind the other.
		select {
		case err := <-waiting[0]:
			if !errors.As(err, &rej) || rej.Reason != ReasonDropped {
				t.Fatalf("quiet-1's oldest waiter: %v, want dropped", err)
			}
		default:
			t.Fatal("quiet-1's oldest waiter kept: drop-oldest on a tie queues the newcomer")
		}
		select {
		case err := <-newcomer:
			t.Fatalf("the newcomer returned %v, want it queued", err)
		case err := <-waiting[1]:
			t.Fatalf("quiet-1's newest waiter returned %v, want it queued", err)
		default:
		}
	} else {
		select {
		case err := <-newcomer:
			if !errors.As(err, &rej) || rej.Reason != ReasonFull {
				t.Fatalf("noisy's newcomer: %v, want rejected as full", err)
			}
		default:
			t.Fatal("noisy's newcomer queued: its flow uses the most")
		}
		for i, w := range waiting {
			select {
			case err := <-w:
				t.Fatalf("waiter %d of %s shed (%v) for a newcomer of noisy, which uses more", i, quiet[i], err)
			default:
			}
		}
	}
	close(rest)
	synctest.Wait()
	if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 || s.Flows != 0 {
		t.Fatalf("after everything returned: %+v", s)
	}
}

// The FlowWeight docs state the largest weight as 1<<20.
func TestFlowWeightCapIsTheDocumentedOne(t *testing.T) {
	if fair.MaxWeight != 1<<20 {
		t.Fatalf("fair.MaxWeight is %d; update the FlowWeight docs", fair.MaxWeight)
	}
}
