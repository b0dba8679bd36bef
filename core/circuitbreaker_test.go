package resilience

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/event"
)

func succeed(context.Context) (int, error) { return 1, nil }
func fail(context.Context) (int, error)    { return 0, errDependency }

func newBreaker(t *testing.T, opts CircuitBreakerOptions[int]) (*CircuitBreaker[int], *Pipeline[int], *recorder) {
	t.Helper()
	cb, err := NewCircuitBreaker(opts)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	return cb, buildResult[int](t, rec, cb), rec
}

// Invariant: the circuit opens exactly when the window holds at least
// MinimumThroughput outcomes and the failure ratio reaches FailureRatio;
// open, it rejects without calling with the time left until a probe.
func TestCircuitBreakerOpensAtRatioAndThroughput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb, p, rec := newBreaker(t, CircuitBreakerOptions[int]{FailureRatio: 0.5, MinimumThroughput: 10, BreakDuration: 4 * time.Second})
		for range 5 {
			p.Execute(context.Background(), succeed)
		}
		for i := range 4 {
			p.Execute(context.Background(), fail)
			if cb.State() != CircuitClosed {
				t.Fatalf("opened after %d failures of %d", i+1, 6+i)
			}
		}
		p.Execute(context.Background(), fail) // 5 of 10
		if cb.State() != CircuitOpen {
			t.Fatalf("state %v, want open", cb.State())
		}
		time.Sleep(time.Second)
		called := false
		_, err := p.Execute(context.Background(), func(context.Context) (int, error) { called = true; return 0, nil })
		var be *BrokenCircuitError
		if called || !errors.As(err, &be) || be.RetryAfter != 3*time.Second {
			t.Fatalf("called=%v err=%v", called, err)
		}
		if !errors.Is(err, ErrBrokenCircuit) || !errors.Is(err, ErrRejected) || be.Isolated {
			t.Fatalf("%v matches the wrong sentinels", err)
		}
		opened := rec.named(event.CircuitOpened)
		if len(opened) != 1 || opened[0].Duration != 4*time.Second || opened[0].Err != errDependency || opened[0].Strategy != "CircuitBreaker" {
			t.Fatalf("opened events %+v", opened)
		}
	})
}

// Invariant: with the defaults (0.1, 100, 30 s) 99 failures do not open
// the circuit; the 100th does.
func TestCircuitBreakerDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb, p, _ := newBreaker(t, CircuitBreakerOptions[int]{})
		for range 99 {
			p.Execute(context.Background(), fail)
		}
		if cb.State() != CircuitClosed {
			t.Fatal("opened below MinimumThroughput")
		}
		p.Execute(context.Background(), fail)
		if cb.State() != CircuitOpen {
			t.Fatal("did not open at 100 failures")
		}
		time.Sleep(5*time.Second - time.Nanosecond)
		if _, err := p.Execute(context.Background(), succeed); !errors.Is(err, ErrBrokenCircuit) {
			t.Fatalf("admitted before BreakDuration: %v", err)
		}
		time.Sleep(time.Nanosecond)
		if _, err := p.Execute(context.Background(), succeed); err != nil || cb.State() != CircuitClosed {
			t.Fatalf("probe after 5s: %v, state %v", err, cb.State())
		}
	})
}

// Invariant: outcomes older than SamplingDuration age out of the ratio.
func TestCircuitBreakerSamplingWindowAgesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb, p, _ := newBreaker(t, CircuitBreakerOptions[int]{FailureRatio: 0.5, MinimumThroughput: 4, SamplingDuration: 10 * time.Second})
		p.Execute(context.Background(), fail)
		p.Execute(context.Background(), fail)
		p.Execute(context.Background(), fail)
		time.Sleep(11 * time.Second)
		p.Execute(context.Background(), fail) // the old three are gone: 1 of 1
		if cb.State() != CircuitClosed {
			t.Fatal("old failures still counted")
		}
		for range 3 {
			p.Execute(context.Background(), succeed)
		}
		p.Execute(context.Background(), fail) // 2 of 5 < 0.5
		if cb.State() != CircuitClosed {
			t.Fatal("opened below ratio")
		}
		p.Execute(context.Background(), fail) // 3 of 6 = 0.5
		if cb.State() != CircuitOpen {
			t.Fatal("did not open at the ratio")
		}
	})
}

// openBreaker returns a breaker opened by two failures.
func openBreaker(t *testing.T, opts CircuitBreakerOptions[int]) (*CircuitBreaker[int], *Pipeline[int], *recorder) {
	t.Helper()
	opts.FailureRatio, opts.MinimumThroughput = 1, 2
	cb, p, rec := newBreaker(t, opts)
	p.Execute(context.Background(), fail)
	p.Execute(context.Background(), fail)
	if cb.State() != CircuitOpen {
		t.Fatalf("state %v", cb.State())
	}
	return cb, p, rec
}

// Invariant: half-open admits a single probe; the others are rejected
// while it runs; its success closes the circuit with fresh statistics.
func TestCircuitBreakerHalfOpenSingleProbeCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb, p, rec := openBreaker(t, CircuitBreakerOptions[int]{BreakDuration: time.Second})
		time.Sleep(time.Second)
		release := make(chan struct{})
		done := make(chan error)
		go func() {
			_, err := p.Execute(context.Background(), func(context.Context) (int, error) { <-release; return 1, nil })
			done <- err
		}()
		synctest.Wait()
		if cb.State() != CircuitHalfOpen {
			t.Fatalf("state %v during probe", cb.State())
		}
		_, err := p.Execute(context.Background(), succeed)
		var be *BrokenCircuitError
		if !errors.As(err, &be) || be.RetryAfter != 0 {
			t.Fatalf("second execution during probe: %v", err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if cb.State() != CircuitClosed {
			t.Fatalf("state %v after successful probe", cb.State())
		}
		// Fresh statistics: one failure does not reopen.
		p.Execute(context.Background(), fail)
		if cb.State() != CircuitClosed {
			t.Fatal("old statistics survived closing")
		}
		names := []event.Name{}
		for _, e := range rec.events {
			names = append(names, e.Name)
		}
		want := []event.Name{event.CircuitOpened, event.CircuitHalfOpened, event.CircuitClosed}
		if fmt.Sprint(names) != fmt.Sprint(want) {
			t.Fatalf("events %v, want %v", names, want)
		}
	})
}

// Invariant: a failed probe reopens the circuit for the generated break
// duration, and the generator sees the count of failed probes.
func TestCircuitBreakerFailedProbeReopensWithGeneratedBreak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var args []BreakDurationArgs
		cb, p, _ := openBreaker(t, CircuitBreakerOptions[int]{BreakDurationGenerator: func(a BreakDurationArgs) time.Duration {
			args = append(args, a)
			return time.Duration(a.HalfOpenAttempts+1) * time.Second
		}})
		for _, wait := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
			time.Sleep(wait - time.Nanosecond)
			if _, err := p.Execute(context.Background(), succeed); !errors.Is(err, ErrBrokenCircuit) {
				t.Fatalf("admitted before %v: %v", wait, err)
			}
			time.Sleep(time.Nanosecond)
			p.Execute(context.Background(), fail)
			if cb.State() != CircuitOpen {
				t.Fatalf("state %v after failed probe", cb.State())
			}
		}
		want := "[{1 2 0} {1 1 1} {1 1 2} {1 1 3}]"
		if fmt.Sprint(args) != want {
			t.Fatalf("generator args %v, want %s", args, want)
		}
	})
}

// Invariant: a probe that hangs past another BreakDuration does not hold
// the circuit half-open forever: one more probe is let through, and the
// stale probe's outcome is ignored.
func TestCircuitBreakerHungProbeIsSuperseded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb, p, _ := openBreaker(t, CircuitBreakerOptions[int]{BreakDuration: time.Second})
		time.Sleep(time.Second)
		release := make(chan struct{})
		done := make(chan struct{})
		go func() {
			p.Execute(context.Background(), func(context.Context) (int, error) { <-release; return 0, errDependency })
			close(done)
		}()
		synctest.Wait()
		time.Sleep(time.Second)
		if _, err := p.Execute(context.Background(), succeed); err != nil || cb.State() != CircuitClosed {
			t.Fatalf("second probe: %v, %v", err, cb.State())
		}
		close(release)
		<-done
		if cb.State() != CircuitClosed {
			t.Fatal("stale probe outcome changed the state")
		}
	})
}

// Invariant: a panicking probe frees the probe slot at once.
func TestCircuitBreakerPanickingProbeFreesTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb, p, _ := openBreaker(t, CircuitBreakerOptions[int]{BreakDuration: time.Second})
		time.Sleep(time.Second)
		func() {
			defer func() { recover() }()
			p.Execute(context.Background(), func(context.Context) (int, error) { panic("boom") })
		}()
		if _, err := p.Execute(context.Background(), succeed); err != nil || cb.State() != CircuitClosed {
			t.Fatalf("after panicking probe: %v, %v", err, cb.State())
		}
	})
}

// Invariant: Isolate rejects everything with an isolated *BrokenCircuitError until
// Close, which closes with fresh statistics; manual transitions call the
// callbacks with Manual set.
func TestCircuitBreakerIsolateAndClose(t *testing.T) {
	var manual []string
	cb, p, _ := newBreaker(t, CircuitBreakerOptions[int]{
		OnOpened: func(_ context.Context, a CircuitArgs[int]) { manual = append(manual, fmt.Sprint("opened ", a.Manual)) },
		OnClosed: func(_ context.Context, a CircuitArgs[int]) { manual = append(manual, fmt.Sprint("closed ", a.Manual)) },
	})
	cb.Isolate(context.Background())
	cb.Isolate(context.Background()) // idempotent
	_, err := p.Execute(context.Background(), succeed)
	var ie *BrokenCircuitError
	if !errors.As(err, &ie) || !ie.Isolated || ie.RetryAfter != 0 || !errors.Is(err, ErrBrokenCircuit) || !errors.Is(err, ErrRejected) {
		t.Fatalf("err = %v", err)
	}
	if cb.State() != CircuitIsolated || cb.State().String() != "isolated" {
		t.Fatalf("state %v", cb.State())
	}
	cb.Close(context.Background())
	if v, err := p.Execute(context.Background(), succeed); err != nil || v != 1 {
		t.Fatalf("after Close: %v", err)
	}
	if fmt.Sprint(manual) != "[opened true closed true]" {
		t.Fatalf("callbacks %v", manual)
	}
}

// Invariant: an execution admitted while closed that ends after the
// circuit opened does not count; nor do unhandled outcomes as failures.
func TestCircuitBreakerIgnoresStaleAndUnhandledOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb, p, _ := newBreaker(t, CircuitBreakerOptions[int]{FailureRatio: 1, MinimumThroughput: 2, BreakDuration: time.Second,
			ShouldHandle: func(o Outcome[int]) bool { return o.Err != nil || o.Value < 0 }})
		release := make(chan struct{})
		done := make(chan struct{})
		go func() {
			p.Execute(context.Background(), func(context.Context) (int, error) { <-release; return 1, nil })
			close(done)
		}()
		synctest.Wait()
		p.Execute(context.Background(), func(context.Context) (int, error) { return -1, nil }) // handled value
		p.Execute(context.Background(), fail)
		if cb.State() != CircuitOpen {
			t.Fatalf("state %v", cb.State())
		}
		close(release)
		<-done
		if cb.State() != CircuitOpen {
			t.Fatal("stale success closed the circuit")
		}
		// The caller's cancellation is not a dependency failure.
		cb2, p2, _ := newBreaker(t, CircuitBreakerOptions[int]{FailureRatio: 1, MinimumThroughput: 2})
		for range 5 {
			p2.Execute(context.Background(), func(context.Context) (int, error) { return 0, context.Canceled })
		}
		if cb2.State() != CircuitClosed {
			t.Fatal("cancellations opened the circuit")
		}
	})
}

// Invariant: invalid options are a *ConfigError naming the field.
func TestCircuitBreakerValidation(t *testing.T) {
	cases := []struct {
		opts  CircuitBreakerOptions[int]
		field string
	}{
		{CircuitBreakerOptions[int]{FailureRatio: 1.5}, "CircuitBreakerOptions.FailureRatio"},
		{CircuitBreakerOptions[int]{FailureRatio: -0.1}, "CircuitBreakerOptions.FailureRatio"},
		{CircuitBreakerOptions[int]{MinimumThroughput: 1}, "CircuitBreakerOptions.MinimumThroughput"},
		{CircuitBreakerOptions[int]{SamplingDuration: 100 * time.Millisecond}, "CircuitBreakerOptions.SamplingDuration"},
		{CircuitBreakerOptions[int]{BreakDuration: -time.Second}, "CircuitBreakerOptions.BreakDuration"},
	}
	for _, c := range cases {
		_, err := NewBuilder[int]().AddCircuitBreaker(c.opts).Build()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%+v: err = %v, want field %s", c.opts, err, c.field)
		}
	}
}

func FuzzCircuitBreakerOptionsValidate(f *testing.F) {
	f.Add(0.1, 100, int64(30*time.Second), int64(5*time.Second))
	f.Add(2.0, 1, int64(-1), int64(1))
	f.Fuzz(func(t *testing.T, ratio float64, thru int, sampling, brk int64) {
		cb, err := NewCircuitBreaker(CircuitBreakerOptions[int]{FailureRatio: ratio, MinimumThroughput: thru,
			SamplingDuration: time.Duration(sampling), BreakDuration: time.Duration(brk)})
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Field, "CircuitBreakerOptions.") {
				t.Fatalf("err = %v", err)
			}
			return
		}
		if cb.ratio <= 0 || cb.ratio > 1 || cb.minThru < 2 || cb.sampling < minCircuitDuration || cb.brk < minCircuitDuration {
			t.Fatalf("accepted %+v", cb.opts)
		}
	})
}

func TestCircuitStateString(t *testing.T) {
	for s, want := range map[CircuitState]string{CircuitClosed: "closed", CircuitOpen: "open", CircuitHalfOpen: "half-open", CircuitIsolated: "isolated", 9: "CircuitState(?)"} {
		if s.String() != want {
			t.Errorf("%d: %q", s, s.String())
		}
	}
	if (&BrokenCircuitError{RetryAfter: time.Second}).Error() == "" || (&BrokenCircuitError{Isolated: true}).Error() == "" {
		t.Error("empty message")
	}
}

// cancelledByCaller runs like a callback whose caller gives up midway: it
// cancels the execution's context and returns the cancellation.
func cancelledByCaller(cancel context.CancelFunc) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		cancel()
		<-ctx.Done()
		return 0, ctx.Err()
	}
}

// Invariant: a cancellation by the caller (the execution's own context is
// done) counts as neither success nor failure, so it cannot dilute the
// failure ratio.
func TestCircuitBreakerCallerCancellationCountsAsNeither(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb, p, _ := newBreaker(t, CircuitBreakerOptions[int]{FailureRatio: 0.5, MinimumThroughput: 2})
		p.Execute(context.Background(), fail)
		for range 5 {
			ctx, cancel := context.WithCancel(context.Background())
			if _, err := p.Execute(ctx, cancelledByCaller(cancel)); !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v", err)
			}
		}
		if cb.State() != CircuitClosed {
			t.Fatal("opened early")
		}
		p.Execute(context.Background(), fail)
		if cb.State() != CircuitOpen {
			t.Fatalf("state %v: caller cancellations were counted", cb.State())
		}
	})
}

// Invariant: a probe cancelled by its caller neither closes nor reopens
// the circuit, and frees the probe slot so the next execution probes.
func TestCircuitBreakerCancelledProbeFreesTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb, p, _ := openBreaker(t, CircuitBreakerOptions[int]{BreakDuration: time.Second})
		time.Sleep(time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		p.Execute(ctx, cancelledByCaller(cancel))
		if cb.State() != CircuitHalfOpen {
			t.Fatalf("state %v after a cancelled probe, want half-open", cb.State())
		}
		if _, err := p.Execute(context.Background(), fail); !errors.Is(err, errDependency) || cb.State() != CircuitOpen {
			t.Fatalf("next execution: %v, state %v; want it to probe and reopen", err, cb.State())
		}
	})
}

// Invariant: BreakDurationGenerator runs outside the breaker's lock, so it
// may read State without deadlocking.
func TestCircuitBreakerGeneratorMayReadState(t *testing.T) {
	var cb *CircuitBreaker[int]
	var seen []CircuitState
	cb, p, _ := newBreaker(t, CircuitBreakerOptions[int]{FailureRatio: 1, MinimumThroughput: 2,
		BreakDurationGenerator: func(BreakDurationArgs) time.Duration {
			seen = append(seen, cb.State())
			return time.Minute
		}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Execute(context.Background(), fail)
		p.Execute(context.Background(), fail)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // bounded sanity check: a deadlock never ends
		t.Fatal("generator calling State deadlocked")
	}
	if cb.State() != CircuitOpen || fmt.Sprint(seen) != "[closed]" {
		t.Fatalf("state %v, generator saw %v", cb.State(), seen)
	}
	if _, err := p.Execute(context.Background(), succeed); !errors.Is(err, ErrBrokenCircuit) {
		t.Fatalf("err = %v", err)
	}
}
