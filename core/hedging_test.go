package resilience

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/property"
)

// attemptLog records, per attempt index, when it started and how it ended.
type attemptLog struct {
	mu        sync.Mutex
	starts    []time.Duration
	cancelled []int
}

func (l *attemptLog) start(since time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts = append(l.starts, time.Since(since))
	return len(l.starts) - 1
}

func (l *attemptLog) cancel(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancelled = append(l.cancelled, n)
}

// Invariant: a hedge starts after Delay; the first acceptable outcome wins;
// the loser's context is cancelled and Execute returns only after the
// loser has returned; its outcome is discarded.
func TestHedgingSlowPrimaryLosesToHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		var discarded []Outcome[int]
		var loserDone time.Duration
		p := buildResult[int](t, rec, newHedging(HedgingOptions[int]{Delay: time.Second,
			OnDiscard: func(o Outcome[int]) { discarded = append(discarded, o) }}))
		log := &attemptLog{}
		start := time.Now()
		v, err := p.Execute(context.Background(), func(ctx context.Context) (int, error) {
			n := log.start(start)
			d := 10 * time.Second // the primary is slow
			if n > 0 {
				d = 500 * time.Millisecond
			}
			select {
			case <-time.After(d):
				return n, nil
			case <-ctx.Done():
				time.Sleep(100 * time.Millisecond) // slow to notice
				loserDone = time.Since(start)
				log.cancel(n)
				return -1, ctx.Err()
			}
		})
		if v != 1 || err != nil {
			t.Fatalf("got %d, %v", v, err)
		}
		if took := time.Since(start); took != 1600*time.Millisecond || loserDone != took {
			t.Fatalf("returned after %v, loser done at %v", took, loserDone)
		}
		if fmt.Sprint(log.starts) != "[0s 1s]" || fmt.Sprint(log.cancelled) != "[0]" {
			t.Fatalf("starts %v cancelled %v", log.starts, log.cancelled)
		}
		if len(discarded) != 1 || !errors.Is(discarded[0].Err, context.Canceled) {
			t.Fatalf("discarded %v", discarded)
		}
		hedges := rec.named(event.Hedging)
		if len(hedges) != 1 || hedges[0].Attempt != 1 || hedges[0].Strategy != "Hedging" {
			t.Fatalf("hedging events %+v", hedges)
		}
		if n := len(rec.named(event.ExecutionAttempt)); n != 2 {
			t.Fatalf("%d attempt events", n)
		}
	})
}

// Invariant: a primary that answers within Delay is the only attempt.
func TestHedgingFastPrimaryLaunchesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := buildResult[int](t, nil, newHedging(HedgingOptions[int]{Delay: 2 * time.Second}))
		calls := 0
		v, err := p.Execute(context.Background(), func(context.Context) (int, error) {
			calls++
			time.Sleep(2*time.Second - time.Nanosecond)
			return 5, nil
		})
		if v != 5 || err != nil || calls != 1 {
			t.Fatalf("got %d, %v after %d calls", v, err, calls)
		}
	})
}

// Invariant: 0 launches every attempt at once, and the fastest wins.
func TestHedgingNoDelayLaunchesAllAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := buildResult[int](t, nil, newHedging(HedgingOptions[int]{MaxHedgedAttempts: 3}))
		log := &attemptLog{}
		start := time.Now()
		v, err := p.Execute(context.Background(), func(ctx context.Context) (int, error) {
			n := log.start(start)
			select {
			case <-time.After(time.Duration(4-n) * time.Second):
				return n, nil
			case <-ctx.Done():
				return -1, ctx.Err()
			}
		})
		if v != 3 || err != nil || time.Since(start) != time.Second {
			t.Fatalf("got %d, %v after %v", v, err, time.Since(start))
		}
		if fmt.Sprint(log.starts) != "[0s 0s 0s 0s]" {
			t.Fatalf("starts %v", log.starts)
		}
	})
}

// Invariant: a handled outcome launches the next attempt at once, the
// delay runs from that launch, and when every outcome is handled the last
// one is returned and the others discarded.
func TestHedgingFailureLaunchesNextAndLastFailureIsReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var discarded int
		p := buildResult[int](t, nil, newHedging(HedgingOptions[int]{MaxHedgedAttempts: 2, Delay: time.Second,
			OnDiscard: func(Outcome[int]) { discarded++ }}))
		log := &attemptLog{}
		start := time.Now()
		v, err := p.Execute(context.Background(), func(ctx context.Context) (int, error) {
			n := log.start(start)
			time.Sleep(300 * time.Millisecond)
			return n, fmt.Errorf("attempt %d: %w", n, errDependency)
		})
		if v != 2 || !errors.Is(err, errDependency) || !strings.Contains(err.Error(), "attempt 2") {
			t.Fatalf("got %d, %v", v, err)
		}
		if fmt.Sprint(log.starts) != "[0s 300ms 600ms]" || discarded != 2 {
			t.Fatalf("starts %v, discarded %d", log.starts, discarded)
		}
	})
}

// Invariant: a panic in an attempt reaches the caller, after the other
// attempts were cancelled and have returned.
func TestHedgingPanicPropagatesAfterOthersReturn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := buildResult[int](t, nil, newHedging(HedgingOptions[int]{}))
		log := &attemptLog{}
		start := time.Now()
		var got any
		func() {
			defer func() { got = recover() }()
			p.Execute(context.Background(), func(ctx context.Context) (int, error) {
				if n := log.start(start); n == 1 {
					panic("hedge blew up")
				}
				<-ctx.Done()
				log.cancel(0)
				return 0, ctx.Err()
			})
		}()
		if got != "hedge blew up" || fmt.Sprint(log.cancelled) != "[0]" {
			t.Fatalf("recovered %v, cancelled %v", got, log.cancelled)
		}
	})
}

// Invariant: ActionGenerator chooses what each hedge runs, and nil stops
// launching.
func TestHedgingActionGenerator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hedgeKey := property.NewKey[int]("hedge")
		var hedged []int
		p := buildResult[int](t, nil, newHedging(HedgingOptions[int]{MaxHedgedAttempts: 5, OnHedging: func(_ context.Context, n int) { hedged = append(hedged, n) },
			ActionGenerator: func(n int, next ResultNext[int]) ResultNext[int] {
				if n > 2 {
					return nil
				}
				return func(ctx context.Context) (int, error) {
					v, err := next(hedgeKey.With(ctx, n))
					return v * 10, err
				}
			}}))
		var calls atomic.Int32
		v, err := p.Execute(context.Background(), func(ctx context.Context) (int, error) {
			calls.Add(1)
			if _, hedge := hedgeKey.Value(ctx); !hedge {
				<-ctx.Done() // the primary hangs
				return 0, ctx.Err()
			}
			time.Sleep(time.Second)
			return 1, nil
		})
		if v != 10 || err != nil || calls.Load() != 3 || fmt.Sprint(hedged) != "[1 2]" {
			t.Fatalf("got %d, %v; %d calls, hedged %v", v, err, calls.Load(), hedged)
		}
	})
}

// Invariant: once the caller's context is done no new attempt starts, and
// the running ones end with it.
func TestHedgingCallerCancellationStopsLaunching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := buildResult[int](t, nil, newHedging(HedgingOptions[int]{MaxHedgedAttempts: 5, Delay: time.Second}))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(1500*time.Millisecond, cancel)
		log := &attemptLog{}
		start := time.Now()
		_, err := p.Execute(ctx, func(ctx context.Context) (int, error) {
			log.start(start)
			<-ctx.Done()
			return 0, ctx.Err()
		})
		time.Sleep(10 * time.Second)
		if !errors.Is(err, context.Canceled) || fmt.Sprint(log.starts) != "[0s 1s]" {
			t.Fatalf("err %v, starts %v", err, log.starts)
		}
	})
}

// Invariant: every outcome is returned or discarded, exactly once: a
// handled outcome superseded by a later winner is discarded too (the 503
// whose body would otherwise leak), as are losers and earlier failures.
func TestHedgingEveryOutcomeReturnedOrDiscardedOnce(t *testing.T) {
	cases := []struct {
		name string
		// ends[n]: when attempt n returns (from its start) and whether it fails.
		ends []struct {
			after time.Duration
			fail  bool
		}
		want int // returned attempt
	}{
		{"fast failure then winner", []struct {
			after time.Duration
			fail  bool
		}{{100 * time.Millisecond, true}, {200 * time.Millisecond, false}}, 1},
		{"failure, slow loser, failure, winner", []struct {
			after time.Duration
			fail  bool
		}{{100 * time.Millisecond, true}, {time.Hour, false}, {50 * time.Millisecond, true}, {100 * time.Millisecond, false}}, 3},
		{"every attempt fails", []struct {
			after time.Duration
			fail  bool
		}{{100 * time.Millisecond, true}, {300 * time.Millisecond, true}, {100 * time.Millisecond, true}}, 1}, // the last to arrive
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				seen := map[int]int{}
				p := buildResult[int](t, nil, newHedging(HedgingOptions[int]{MaxHedgedAttempts: len(c.ends) - 1, Delay: 150 * time.Millisecond,
					OnDiscard: func(o Outcome[int]) { seen[o.Value]++ }}))
				log := &attemptLog{}
				v, err := p.Execute(context.Background(), func(ctx context.Context) (int, error) {
					n := log.start(time.Now())
					e := c.ends[n]
					select {
					case <-time.After(e.after):
					case <-ctx.Done():
						return n, ctx.Err()
					}
					if e.fail {
						return n, errDependency
					}
					return n, nil
				})
				if v != c.want || (err != nil) != c.ends[c.want].fail {
					t.Fatalf("got %d, %v; want attempt %d", v, err, c.want)
				}
				seen[v]++
				for n := range c.ends {
					if seen[n] != 1 {
						t.Fatalf("attempt %d returned or discarded %d times (all: %v)", n, seen[n], seen)
					}
				}
			})
		})
	}
}

// Invariant 4: by default every attempt's context is cancelled before
// Execute returns, the winner's included.
func TestHedgingCancelsWinnerContextByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := buildResult[context.Context](t, nil, newHedging(HedgingOptions[context.Context]{}))
		var mu sync.Mutex
		var all []context.Context
		won, err := p.Execute(context.Background(), func(ctx context.Context) (context.Context, error) {
			mu.Lock()
			all = append(all, ctx)
			first := len(all) == 1
			mu.Unlock()
			if first {
				return ctx, nil
			}
			<-ctx.Done()
			return nil, ctx.Err()
		})
		if err != nil || won == nil {
			t.Fatalf("winner: %v", err)
		}
		for i, ctx := range all {
			if ctx.Err() == nil {
				t.Fatalf("attempt %d's context still live after Execute", i)
			}
		}
	})
}

// Invariant: with KeepWinner, the winner's context stays live (a body can
// still be read from it) until release is called, the losers' are
// cancelled, and what KeepWinner returns is what Execute returns.
func TestHedgingKeepWinnerKeepsContextUntilRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var release func()
		var kept Outcome[context.Context]
		p := buildResult[context.Context](t, nil, newHedging(HedgingOptions[context.Context]{KeepWinner: func(o Outcome[context.Context], r func()) Outcome[context.Context] {
			kept, release = o, r
			return Outcome[context.Context]{Value: context.WithValue(o.Value, keptKey{}, true)}
		}}))
		var mu sync.Mutex
		var all []context.Context
		won, err := p.Execute(context.Background(), func(ctx context.Context) (context.Context, error) {
			mu.Lock()
			all = append(all, ctx)
			first := len(all) == 1
			mu.Unlock()
			if first {
				return ctx, nil
			}
			<-ctx.Done()
			return nil, ctx.Err()
		})
		if err != nil || won.Value(keptKey{}) != true || kept.Value == nil {
			t.Fatalf("winner %v, %v", won, err)
		}
		if won.Err() != nil {
			t.Fatal("kept context cancelled before release")
		}
		if i := slices.Index(all, kept.Value); all[1-i].Err() == nil {
			t.Fatal("loser's context not cancelled")
		}
		release()
		if won.Err() == nil {
			t.Fatal("release did not cancel the kept context")
		}
	})
}

// countingParent is a long-lived caller context that counts the children
// registered on it and still registered (through AfterFunc, which
// context.WithCancel uses for a parent that is not one of its own types).
type countingParent struct {
	context.Context // Background: values and no deadline
	done            chan struct{}
	live            atomic.Int64
}

func (p *countingParent) Done() <-chan struct{} { return p.done }
func (p *countingParent) Err() error            { return nil }

func (p *countingParent) AfterFunc(func()) (stop func() bool) {
	p.live.Add(1)
	var once sync.Once
	return func() bool {
		stopped := false
		once.Do(func() { p.live.Add(-1); stopped = true })
		return stopped
	}
}

// Invariant 4: executions under one long-lived parent leave nothing
// registered on it, whether one attempt ran or several raced.
func TestHedgingLeavesNothingRegisteredOnParent(t *testing.T) {
	parent := &countingParent{Context: context.Background(), done: make(chan struct{})}
	for _, opts := range []HedgingOptions[int]{{}, {MaxHedgedAttempts: 2}} {
		s := newHedging(opts)
		for range 10000 {
			if _, err := s.ExecuteResult(parent, Telemetry{}, func(context.Context) (int, error) { return 1, nil }); err != nil {
				t.Fatal(err)
			}
		}
		if n := parent.live.Load(); n != 0 {
			t.Fatalf("%+v: %d contexts still registered on the parent", opts, n)
		}
	}
}

// Invariant 4: a hook that panics on the caller's goroutine (ShouldHandle,
// OnHedging, ActionGenerator) cancels every launched attempt and waits for
// it before the panic propagates; what the attempts returned is discarded.
func TestHedgingHookPanicCancelsAndWaitsForAttempts(t *testing.T) {
	hooks := map[string]func(*HedgingOptions[int]){
		"ShouldHandle": func(o *HedgingOptions[int]) {
			o.Delay = 0
			o.ShouldHandle = func(o Outcome[int]) bool {
				if o.Value == 0 {
					panic("hook")
				}
				return o.Err != nil
			}
		},
		"OnHedging": func(o *HedgingOptions[int]) {
			o.MaxHedgedAttempts = 2
			o.Delay = time.Second
			o.OnHedging = func(_ context.Context, n int) {
				if n == 2 {
					panic("hook")
				}
			}
		},
		"ActionGenerator": func(o *HedgingOptions[int]) {
			o.MaxHedgedAttempts = 2
			o.Delay = time.Second
			o.ActionGenerator = func(n int, next ResultNext[int]) ResultNext[int] {
				if n == 2 {
					panic("hook")
				}
				return next
			}
		},
	}
	for name, set := range hooks {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var running atomic.Int32
				var discarded []int
				opts := HedgingOptions[int]{OnDiscard: func(o Outcome[int]) { discarded = append(discarded, o.Value) }}
				set(&opts)
				p := buildResult[int](t, nil, newHedging(opts))
				var attempts atomic.Int32
				var got any
				func() {
					defer func() { got = recover() }()
					p.Execute(context.Background(), func(ctx context.Context) (int, error) {
						n := int(attempts.Add(1) - 1)
						if name == "ShouldHandle" && n == 0 {
							time.Sleep(100 * time.Millisecond)
							return 0, nil // its outcome makes ShouldHandle panic
						}
						running.Add(1)
						defer running.Add(-1)
						<-ctx.Done()
						time.Sleep(100 * time.Millisecond) // slow to notice
						return 10 + n, ctx.Err()
					})
				}()
				if got != "hook" {
					t.Fatalf("recovered %v", got)
				}
				if n := running.Load(); n != 0 {
					t.Fatalf("%d attempts still running after the panic propagated", n)
				}
				slices.Sort(discarded)
				want := map[string]string{"ShouldHandle": "[0 11]", "OnHedging": "[10 11]", "ActionGenerator": "[10 11]"}[name]
				if fmt.Sprint(discarded) != want {
					t.Fatalf("discarded %v, want %s", discarded, want)
				}
			})
		})
	}
}

// Invariant: WithSingleAttempt runs one attempt, with no hedge.
func TestHedgingSingleAttempt(t *testing.T) {
	p := buildResult[int](t, nil, newHedging(HedgingOptions[int]{}))
	calls := 0
	if _, err := p.Execute(property.WithSingleAttempt(context.Background()), func(context.Context) (int, error) {
		calls++
		return 0, errDependency
	}); err != errDependency || calls != 1 {
		t.Fatalf("%d calls, %v", calls, err)
	}
}

// Invariant: invalid options are a *ConfigError naming the field.
func TestHedgingValidation(t *testing.T) {
	cases := []struct {
		opts  HedgingOptions[int]
		field string
	}{
		{HedgingOptions[int]{MaxHedgedAttempts: -1}, "HedgingOptions.MaxHedgedAttempts"},
		{HedgingOptions[int]{MaxHedgedAttempts: 11}, "HedgingOptions.MaxHedgedAttempts"},
		{HedgingOptions[int]{Delay: -2}, "HedgingOptions.Delay"},
	}
	for _, c := range cases {
		_, err := NewBuilder[int]().AddHedging(c.opts).Build()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%+v: err = %v, want field %s", c.opts, err, c.field)
		}
	}
	if _, err := NewHedging(HedgingOptions[int]{MaxHedgedAttempts: 10}); err != nil {
		t.Fatal(err)
	}
}

func FuzzHedgingOptionsValidate(f *testing.F) {
	f.Add(0, int64(0))
	f.Add(11, int64(-3))
	f.Fuzz(func(t *testing.T, n int, delay int64) {
		s, err := NewHedging(HedgingOptions[int]{MaxHedgedAttempts: n, Delay: time.Duration(delay)})
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Field, "HedgingOptions.") {
				t.Fatalf("err = %v", err)
			}
			return
		}
		if s.max < 1 || s.max > maxHedgedAttempts || s.delay < 0 {
			t.Fatalf("accepted %+v", s.opts)
		}
	})
}

// keptKey marks the context KeepWinner returns in
// TestHedgingKeepWinnerKeepsContextUntilRelease.
type keptKey struct{}
