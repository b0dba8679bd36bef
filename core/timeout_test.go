package resilience

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/property"
)

func timeoutPipeline(t *testing.T, l event.Listener, s Strategy) *Pipeline[int] {
	t.Helper()
	p, err := NewBuilder[int](WithName("p"), WithListener(l)).AddStrategy(s).Build()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Invariant: the strategy's own deadline yields *TimeoutRejectedError, which
// is also the cause seen by the callback, exactly at the deadline.
func TestTimeoutFiresAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []event.Event
		l := event.ListenerFunc(func(_ context.Context, e event.Event) { events = append(events, e) })
		p := timeoutPipeline(t, l, newTimeout(TimeoutOptions{Timeout: 2 * time.Second}))
		start := time.Now()
		var cause error
		_, err := p.Execute(context.Background(), func(ctx context.Context) (int, error) {
			<-ctx.Done()
			cause = context.Cause(ctx)
			return 0, ctx.Err()
		})
		if elapsed := time.Since(start); elapsed != 2*time.Second {
			t.Fatalf("returned after %v, want exactly 2s", elapsed)
		}
		var te *TimeoutRejectedError
		if !errors.As(err, &te) || te.Timeout != 2*time.Second {
			t.Fatalf("err = %v, want *TimeoutRejectedError{2s}", err)
		}
		if !errors.Is(err, ErrTimeoutRejected) || !errors.Is(err, ErrRejected) {
			t.Fatalf("err %v does not match the sentinels", err)
		}
		if cause != err {
			t.Fatalf("callback saw cause %v, want the returned error", cause)
		}
		if len(events) != 1 || events[0].Name != event.Timeout || events[0].Pipeline != "p" || events[0].Strategy != "Timeout" || events[0].Duration != 2*time.Second {
			t.Fatalf("events = %+v", events)
		}
	})
}

// Invariant: the caller's cancellation is the caller's error, not a timeout.
func TestTimeoutCallerCancellationIsNotATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events int
		l := event.ListenerFunc(func(context.Context, event.Event) { events++ })
		p := timeoutPipeline(t, l, newTimeout(TimeoutOptions{Timeout: time.Minute}))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		_, err := p.Execute(ctx, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		})
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeoutRejected) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if events != 0 {
			t.Fatalf("%d timeout events for a caller cancellation", events)
		}
	})
}

// Invariant: deadlines are budgets; an earlier caller deadline wins and is
// reported as the caller's, not as this strategy's timeout.
func TestTimeoutEarlierCallerDeadlineWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := timeoutPipeline(t, nil, newTimeout(TimeoutOptions{Timeout: time.Minute}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := p.Execute(ctx, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		})
		if time.Since(start) != time.Second {
			t.Fatalf("took %v", time.Since(start))
		}
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeoutRejected) {
			t.Fatalf("err = %v", err)
		}
	})
}

// A callback that ignores its context still completes; the strategy waits for
// it (nothing outlives the execution) and a late success stays a success.
func TestTimeoutWaitsForCallbackAndKeepsLateSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := timeoutPipeline(t, nil, newTimeout(TimeoutOptions{Timeout: time.Second}))
		start := time.Now()
		v, err := p.Execute(context.Background(), func(ctx context.Context) (int, error) {
			time.Sleep(3 * time.Second)
			return 9, nil
		})
		if v != 9 || err != nil || time.Since(start) != 3*time.Second {
			t.Fatalf("Execute = %d, %v after %v", v, err, time.Since(start))
		}
	})
}

func TestTimeoutGenerator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget := property.NewKey[time.Duration]("budget")
		s, err := NewTimeout(TimeoutOptions{Name: "per-call", Generator: func(ctx context.Context) time.Duration {
			d, _ := budget.Value(ctx)
			return d
		}})
		if err != nil {
			t.Fatal(err)
		}
		p := timeoutPipeline(t, nil, s)
		wait := func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }

		start := time.Now()
		_, err = p.Execute(budget.With(context.Background(), 5*time.Second), wait)
		var te *TimeoutRejectedError
		if !errors.As(err, &te) || te.Timeout != 5*time.Second || time.Since(start) != 5*time.Second {
			t.Fatalf("generated timeout: err=%v after %v", err, time.Since(start))
		}
		// A non-positive generated timeout means no timeout for that execution.
		v, err := p.Execute(context.Background(), func(ctx context.Context) (int, error) {
			if _, ok := ctx.Deadline(); ok {
				return 0, errors.New("unexpected deadline")
			}
			return 1, nil
		})
		if v != 1 || err != nil {
			t.Fatalf("no-timeout execution = %d, %v", v, err)
		}
	})
}

func TestTimeoutValidation(t *testing.T) {
	cases := []struct {
		name string
		opts TimeoutOptions
		ok   bool
	}{
		{"zero", TimeoutOptions{}, false},
		{"negative", TimeoutOptions{Timeout: -time.Second}, false},
		{"overflowing", TimeoutOptions{Timeout: time.Duration(1<<63 - 1)}, false},
		{"positive", TimeoutOptions{Timeout: time.Nanosecond}, true},
		{"generator without fixed", TimeoutOptions{Generator: func(context.Context) time.Duration { return 0 }}, true},
		{"generator with negative", TimeoutOptions{Timeout: -1, Generator: func(context.Context) time.Duration { return 0 }}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewTimeout(c.opts)
			if c.ok != (err == nil) {
				t.Fatalf("NewTimeout(%+v) err = %v", c.opts, err)
			}
			if err != nil && (!errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "TimeoutOptions.Timeout")) {
				t.Fatalf("error %q does not name the field", err)
			}
		})
	}
}

func FuzzTimeoutOptions(f *testing.F) {
	f.Add(int64(0))
	f.Add(int64(-1))
	f.Add(int64(1))
	f.Add(int64(1<<63 - 1))
	f.Fuzz(func(t *testing.T, d int64) {
		s, err := NewTimeout(TimeoutOptions{Timeout: time.Duration(d)})
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != "TimeoutOptions.Timeout" {
				t.Fatalf("err = %v", err)
			}
			return
		}
		if s.opts.Timeout <= 0 || s.opts.Timeout > maxDuration {
			t.Fatalf("accepted %v", s.opts.Timeout)
		}
	})
}

// The callback's context is armed lazily; whichever way the callback looks
// at it, it must see what context.WithDeadlineCause would give.
func TestTimeoutContextBehavesLikeWithDeadlineCause(t *testing.T) {
	p := func(t *testing.T) *Pipeline[int] {
		return timeoutPipeline(t, nil, newTimeout(TimeoutOptions{Timeout: time.Second}))
	}
	t.Run("never looked at", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, err := p(t).Execute(context.Background(), func(ctx context.Context) (int, error) {
				time.Sleep(2 * time.Second)
				return 0, errors.New("gave up")
			})
			if !errors.Is(err, ErrTimeoutRejected) {
				t.Fatalf("err = %v, want a timeout", err)
			}
		})
	})
	t.Run("Err after the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, err := p(t).Execute(context.Background(), func(ctx context.Context) (int, error) {
				if ctx.Err() != nil {
					return 0, errors.New("done too early")
				}
				// Just past the deadline: at the very instant, the sleeper
				// and the deadline's timer may run in either order.
				time.Sleep(time.Second + time.Millisecond)
				if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
					return 0, fmt.Errorf("Err = %v", ctx.Err())
				}
				if !errors.Is(context.Cause(ctx), ErrTimeoutRejected) {
					return 0, fmt.Errorf("Cause = %v", context.Cause(ctx))
				}
				select {
				case <-ctx.Done():
				default:
					return 0, errors.New("Done not closed after Err reported the deadline")
				}
				return 0, ctx.Err()
			})
			if !errors.Is(err, ErrTimeoutRejected) {
				t.Fatalf("err = %v", err)
			}
		})
	})
	t.Run("derived context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			_, err := p(t).Execute(context.Background(), func(ctx context.Context) (int, error) {
				child, cancel := context.WithCancel(ctx)
				defer cancel()
				<-child.Done()
				if time.Since(start) != time.Second || !errors.Is(child.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(child), ErrTimeoutRejected) {
					return 0, fmt.Errorf("child ended after %v with %v / %v", time.Since(start), child.Err(), context.Cause(child))
				}
				return 0, child.Err()
			})
			if !errors.Is(err, ErrTimeoutRejected) {
				t.Fatalf("err = %v", err)
			}
		})
	})
	t.Run("earlier parent deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			pd, _ := parent.Deadline()
			_, err := p(t).Execute(parent, func(ctx context.Context) (int, error) {
				if d, ok := ctx.Deadline(); !ok || !d.Equal(pd) {
					return 0, fmt.Errorf("Deadline = %v, want the parent's %v", d, pd)
				}
				time.Sleep(600 * time.Millisecond)
				return 0, ctx.Err()
			})
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeoutRejected) {
				t.Fatalf("err = %v, want the parent's deadline", err)
			}
		})
	})
	t.Run("values and concurrent arming", func(t *testing.T) {
		key := property.NewKey[string]("k")
		_, err := p(t).Execute(key.With(context.Background(), "v"), func(ctx context.Context) (int, error) {
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_ = ctx.Done()
					_ = ctx.Err()
				}()
			}
			wg.Wait()
			if v, _ := key.Value(ctx); v != "v" {
				return 0, fmt.Errorf("value = %q", v)
			}
			return 0, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func BenchmarkPipelineExecuteTimeoutWatched(b *testing.B) {
	p, _ := NewBuilder[int]().AddTimeout(TimeoutOptions{Timeout: 1e9}).Build()
	ctx := context.Background()
	fn := func(ctx context.Context) (int, error) { _ = ctx.Done(); return 1, nil }
	b.ReportAllocs()
	for b.Loop() {
		_, _ = p.Execute(ctx, fn)
	}
}

// The executions of one strategy share its deadline timer: each still
// times out exactly at its own deadline, in whatever order they started
// and finished, and the timer idles when nothing is due.
func TestTimeoutSharedTimerEachExecutionAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTimeout(TimeoutOptions{Timeout: 5 * time.Second})
		s.deadlines.AllowFakeClock() // this strategy lives in this bubble only
		p := timeoutPipeline(t, nil, s)
		type result struct {
			after time.Duration
			err   error
		}
		results := make([]chan result, 3)
		for i := range results {
			results[i] = make(chan result, 1)
			start := time.Now()
			go func() {
				_, err := p.Execute(context.Background(), func(ctx context.Context) (int, error) {
					if i == 1 { // finishes early: leaves the list
						return 0, nil
					}
					<-ctx.Done()
					return 0, ctx.Err()
				})
				results[i] <- result{time.Since(start), err}
			}()
			time.Sleep(time.Second)
		}
		for i, want := range []time.Duration{5 * time.Second, 0, 5 * time.Second} {
			r := <-results[i]
			if r.after != want {
				t.Errorf("execution %d returned after %v, want %v", i, r.after, want)
			}
			if (want != 0) != errors.Is(r.err, ErrTimeoutRejected) {
				t.Errorf("execution %d: err %v", i, r.err)
			}
		}
		time.Sleep(10 * time.Second)
		if !s.deadlines.Idle() {
			t.Errorf("deadline timer not idle: %d listed", s.deadlines.Len())
		}
	})
}

// A strategy used both on the real clock and inside a synctest bubble (a
// test suite sharing one) keeps timing out on time: its timer never moves
// between clocks.
func TestTimeoutAcrossBubbles(t *testing.T) {
	s := newTimeout(TimeoutOptions{Timeout: 50 * time.Millisecond})
	run := func() error {
		p, _ := NewBuilder[int]().AddStrategy(s).Build()
		_, err := p.Execute(context.Background(), func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		})
		return err
	}
	for range 2 {
		synctest.Test(t, func(t *testing.T) {
			if err := run(); !errors.Is(err, ErrTimeoutRejected) {
				t.Fatalf("in a bubble: %v", err)
			}
		})
		if err := run(); !errors.Is(err, ErrTimeoutRejected) {
			t.Fatalf("outside a bubble: %v", err)
		}
	}
}

// The caller's cancellation wins even when the callback never looked at its
// context before our deadline: the caller's error comes back, no timeout is
// reported.
func TestTimeoutUnwatchedCallerCancellationIsNotATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events int
		l := event.ListenerFunc(func(context.Context, event.Event) { events++ })
		s := newTimeout(TimeoutOptions{Timeout: 2 * time.Second})
		s.deadlines.AllowFakeClock()
		p := timeoutPipeline(t, l, s)
		ctx, cancel := context.WithCancelCause(context.Background())
		gaveUp := errors.New("caller gave up")
		time.AfterFunc(time.Second, func() { cancel(gaveUp) })
		var cause error
		_, err := p.Execute(ctx, func(ctx context.Context) (int, error) {
			time.Sleep(3 * time.Second) // busy, not watching
			cause = context.Cause(ctx)
			return 0, ctx.Err()
		})
		if errors.Is(err, ErrTimeoutRejected) || !errors.Is(err, context.Canceled) || events != 0 {
			t.Fatalf("err = %v, %d timeout events; want the caller's cancellation", err, events)
		}
		if cause != gaveUp {
			t.Fatalf("callback saw cause %v", cause)
		}
	})
}

// The builder shortcut with options builds the same strategy and reports
// invalid options at Build.
func TestAddTimeoutWithOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := NewBuilder[int]().AddTimeout(TimeoutOptions{Name: "budget", Timeout: time.Second}).Build()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(p.String(), "budget") {
			t.Fatalf("pipeline %s lacks the strategy name", p)
		}
		_, err = p.Execute(context.Background(), func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		})
		if !errors.Is(err, ErrTimeoutRejected) {
			t.Fatalf("err = %v", err)
		}
	})
	if _, err := NewBuilder[int]().AddTimeout(TimeoutOptions{Timeout: -1}).Build(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("invalid options: err = %v", err)
	}
}

// Invariant: OnTimeout is called once when the strategy's own deadline
// ended an execution, with the timeout that fired and the caller's
// context, and never for a caller's cancellation or a success.
func TestTimeoutOnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type call struct {
			d      time.Duration
			caller bool
		}
		var calls []call
		key := property.NewKey[bool]("caller")
		s, err := NewTimeout(TimeoutOptions{Timeout: time.Second, OnTimeout: func(ctx context.Context, d time.Duration) {
			v, _ := key.Value(ctx)
			calls = append(calls, call{d, v && ctx.Err() == nil})
		}})
		if err != nil {
			t.Fatal(err)
		}
		p := timeoutPipeline(t, nil, s)
		ctx := key.With(context.Background(), true)
		if _, err := p.Execute(ctx, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		}); !errors.Is(err, ErrTimeoutRejected) {
			t.Fatalf("err = %v", err)
		}
		if _, err := p.Execute(ctx, succeed); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		p.Execute(cctx, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		if len(calls) != 1 || calls[0] != (call{time.Second, true}) {
			t.Fatalf("OnTimeout calls %+v; want one with 1s and the caller's context", calls)
		}
	})
}
