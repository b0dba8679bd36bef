package inbound

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// fakeServe is the fake framework's adapter: it runs handler through
// ExecuteInPlace on a goroutine of its own and sends exactly one response
// on the wire, the handler's when it returned in time, Render's at the
// deadline, returning then (as an adapter for fasthttp, whose response
// goes out when the adapter's handler returns, would). Like fasthttp's,
// the handler writes into its request object, which the adapter sends
// only when it answers for it, so a late handler's writes never leave.
func fakeServe(m *Middleware, ctx context.Context, req *fakeRequest, wire *fakeWire, handler func(ctx context.Context, req *fakeRequest) error) {
	returned, expired := make(chan error, 1), make(chan error, 1)
	go func() {
		returned <- m.executeInPlace(ctx, req, func(ctx context.Context) error { return handler(ctx, req) },
			func(cause error) { expired <- cause })
	}()
	var err error
	select {
	case err = <-returned:
	case err = <-expired:
	}
	if err != nil {
		if resp, ok := m.render(err); ok {
			wire.send(resp)
		}
		return
	}
	wire.send(Response{Status: req.status, Body: req.body})
}

// Invariants 7 and 5: a handler past its deadline keeps its permit until it
// returns, and the client gets a complete 504 at the deadline, without
// net/http: the late handler's writes are dropped and it is counted late.
func TestExecuteInPlaceAnswersAtDeadlineHandlerKeepsPermit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var timeouts atomic.Int32
		m, err := newFor(fakeFramework, Options{
			Timeout:     time.Second,
			Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
			Listener: event.ListenerFunc(func(_ context.Context, e event.Event) {
				if e.Name == event.Timeout {
					timeouts.Add(1)
				}
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var cause error
		wire := newFakeWire()
		served := make(chan struct{})
		start := time.Now()
		go func() {
			defer close(served)
			fakeServe(m, t.Context(), &fakeRequest{method: "GET", path: "/slow"}, wire, func(ctx context.Context, req *fakeRequest) error {
				<-release // ignores its context
				cause = context.Cause(ctx)
				req.status, req.body = 200, []byte("late")
				return nil
			})
		}()
		<-wire.sent
		if d := time.Since(start); d != time.Second {
			t.Errorf("504 after %v, want at the deadline (1s)", d)
		}
		<-served // the adapter returned at the deadline, the handler still running
		synctest.Wait()
		got := wire.all()
		if len(got) != 1 || got[0].Status != 504 || string(got[0].Body) != string(respTimeout.Body) {
			t.Fatalf("wire: %+v, want one complete 504", got)
		}
		if s := m.Stats(); s.InFlight != 1 || s.Late != 1 || s.LateTotal != 1 {
			t.Errorf("stats at the deadline %+v: the late handler must keep its permit and count as late", s)
		}
		if timeouts.Load() != 1 {
			t.Errorf("%d timeout events at the deadline, want 1", timeouts.Load())
		}
		// The permit is still held: the next request is shed.
		wire2 := newFakeWire()
		fakeServe(m, t.Context(), &fakeRequest{}, wire2, func(context.Context, *fakeRequest) error {
			t.Error("admitted while the late handler held the only permit")
			return nil
		})
		if r := wire2.all(); len(r) != 1 || r[0].Status != 503 {
			t.Errorf("second request: %+v, want 503", r)
		}
		close(release)
		synctest.Wait()
		if s := m.Stats(); s.InFlight != 0 || s.Late != 0 || s.LateTotal != 1 {
			t.Errorf("stats after the late handler returned %+v", s)
		}
		if len(wire.all()) != 1 {
			t.Errorf("the late handler's response reached the wire: %+v", wire.all())
		}
		var tre *resilience.TimeoutRejectedError
		if !errors.As(cause, &tre) {
			t.Errorf("handler's context cause %v, want the timeout", cause)
		}
		if timeouts.Load() != 1 {
			t.Errorf("%d timeout events in all, want 1", timeouts.Load())
		}
	})
}

// A handler that returns in time answers itself, its error is returned,
// and its panic propagates to the adapter with the permit returned.
func TestExecuteInPlaceInTimeAndPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := newFor(fakeFramework, Options{Timeout: time.Second, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
		if err != nil {
			t.Fatal(err)
		}
		wire := newFakeWire()
		fakeServe(m, t.Context(), &fakeRequest{}, wire, func(ctx context.Context, req *fakeRequest) error {
			time.Sleep(time.Second / 2)
			req.status, req.body = 201, []byte("made")
			return nil
		})
		if r := wire.all(); len(r) != 1 || r[0].Status != 201 || string(r[0].Body) != "made" {
			t.Errorf("in time: %+v", r)
		}
		boom := errors.New("boom")
		if err := m.executeInPlace(t.Context(), &fakeRequest{}, func(context.Context) error { return boom }, func(error) {}); err != boom {
			t.Errorf("fn's error: %v", err)
		}
		func() {
			defer func() {
				if r := recover(); r != "panic in handler" {
					t.Errorf("recovered %v", r)
				}
			}()
			_ = m.executeInPlace(t.Context(), &fakeRequest{}, func(context.Context) error { panic("panic in handler") }, func(error) {})
			t.Error("no panic")
		}()
		synctest.Wait()
		if s := m.Stats(); s.InFlight != 0 || s.LateTotal != 0 {
			t.Errorf("stats %+v", s)
		}
		if err := m.executeInPlace(t.Context(), nil, nil, func(error) {}); err != resilience.ErrNilCallback {
			t.Errorf("nil fn: %v", err)
		}
	})
}

// A timeout strategy of a custom pipeline is answered at its deadline too.
func TestExecuteInPlaceCustomPipelineTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := resilience.NewBuilder[struct{}]().AddTimeout(resilience.TimeoutOptions{Timeout: time.Second}).Build()
		if err != nil {
			t.Fatal(err)
		}
		m, err := newFor(fakeFramework, Options{Pipeline: p})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		wire := newFakeWire()
		start := time.Now()
		go fakeServe(m, t.Context(), &fakeRequest{}, wire, func(ctx context.Context, req *fakeRequest) error {
			<-release
			return nil
		})
		<-wire.sent
		if d := time.Since(start); d != time.Second {
			t.Errorf("answered after %v", d)
		}
		if r := wire.all(); len(r) != 1 || r[0].Status != 504 {
			t.Errorf("wire %+v", r)
		}
		if s := m.Stats(); s.Late != 1 {
			t.Errorf("stats %+v", s)
		}
		close(release)
		synctest.Wait()
		if s := m.Stats(); s.Late != 0 || s.LateTotal != 1 {
			t.Errorf("stats after %+v", s)
		}
	})
}

// Under the adaptive limiter a handler that ExecuteInPlace answered at the
// deadline counts as a drop (overload) once it returns, and one that
// returned in time as a sample.
func TestExecuteInPlaceAdaptiveOutcome(t *testing.T) {
	for _, c := range []struct {
		name string
		hold time.Duration
		want resilience.LimitOutcome
	}{
		{"in time", time.Second, resilience.LimitSampled},
		{"late", 10 * time.Second, resilience.LimitDropped},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &outcomeRecorder{}
				m, err := newFor(fakeFramework, adaptiveOptions(rec, 5*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				fakeServe(m, t.Context(), &fakeRequest{}, newFakeWire(), func(context.Context, *fakeRequest) error {
					time.Sleep(c.hold) // ignores its context
					return nil
				})
				synctest.Wait()
				if rec.outcome() != resilience.LimitIgnored && c.want == resilience.LimitDropped {
					t.Fatalf("counted before the late handler returned")
				}
				time.Sleep(c.hold)
				synctest.Wait()
				if got := rec.outcome(); got != c.want {
					t.Fatalf("counted as %v, want %v", got, c.want)
				}
				if s := m.Stats(); s.InFlight != 0 || s.Late != 0 {
					t.Fatalf("stats %+v", s)
				}
			})
		})
	}
}
