package inbound

import (
	"context"
	"errors"
	"log"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Invariant: with ExecuteInPlace the handler runs on the caller's
// goroutine past its deadline, keeping its permit and counted late, while
// expired hands the 504 to the layer that answers at the deadline.
func TestExecuteInPlaceReportsDeadlineHandlerKeepsPermit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := newFor(fakeFramework, Options{
			Timeout:     time.Second,
			Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		wire := newFakeWire()
		result := make(chan error, 1)
		start := time.Now()
		go func() {
			result <- m.executeInPlace(t.Context(), &fakeRequest{}, func(ctx context.Context) error {
				<-release // ignores its context
				return nil
			}, func(cause error) {
				if resp, ok := m.render(cause); ok {
					wire.send(resp)
				}
			})
		}()
		<-wire.sent
		if d := time.Since(start); d != time.Second {
			t.Errorf("504 handed over after %v, want at the deadline (1s)", d)
		}
		synctest.Wait()
		if got := wire.all(); len(got) != 1 || got[0].Status != 504 || string(got[0].Body) != string(respTimeout.Body) {
			t.Fatalf("wire: %+v, want one complete 504", got)
		}
		select {
		case err := <-result:
			t.Fatalf("ExecuteInPlace returned %v before fn did", err)
		default:
		}
		if s := m.Stats(); s.InFlight != 1 || s.Late != 1 || s.LateTotal != 1 {
			t.Errorf("stats at the deadline %+v: the late handler must keep its permit and count as late", s)
		}
		close(release)
		if err := <-result; !errors.Is(err, resilience.ErrTimeoutRejected) {
			t.Errorf("ExecuteInPlace returned %v, want the timeout", err)
		}
		if s := m.Stats(); s.InFlight != 0 || s.Late != 0 || s.LateTotal != 1 {
			t.Errorf("stats after the late handler returned %+v", s)
		}
	})
}

// Invariant: a handler that returns in time is never reported expired,
// and a handler's error comes back unchanged.
func TestExecuteInPlaceInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := newFor(fakeFramework, Options{Timeout: time.Second, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
		if err != nil {
			t.Fatal(err)
		}
		own := errors.New("handler error")
		expired := 0
		err = m.executeInPlace(t.Context(), &fakeRequest{}, func(ctx context.Context) error {
			time.Sleep(999 * time.Millisecond)
			return own
		}, func(error) { expired++ })
		synctest.Wait()
		if err != own || expired != 0 {
			t.Errorf("returned %v with %d expiries, want the handler's error and none", err, expired)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if s := m.Stats(); s.InFlight != 0 || s.Late != 0 || s.LateTotal != 0 || expired != 0 {
			t.Errorf("after the handler returned: %+v, %d expiries", s, expired)
		}
	})
}

// Invariant: under AnswerPanics a panic after ExecuteInPlace's deadline
// answered is logged as coming after the 504, never as "answered 500":
// the 504 is the response, and no 500 follows it.
func TestExecuteInPlaceLatePanicLoggedAfterTheAnswer(t *testing.T) {
	logs := captureLog(t)
	synctest.Test(t, func(t *testing.T) {
		m, err := newFor(fakeFramework, Options{
			Timeout:      time.Second,
			Concurrency:  &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
			AnswerPanics: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		expired := make(chan struct{})
		err = m.executeInPlace(t.Context(), &fakeRequest{}, func(ctx context.Context) error {
			<-expired // the deadline answers first
			panic("late")
		}, func(error) { close(expired) })
		var pe *PanicError
		if !errors.As(err, &pe) || pe.Value != "late" {
			t.Errorf("ExecuteInPlace returned %v, want the *PanicError", err)
		}
		if s := m.Stats(); s.InFlight != 0 || s.Late != 0 {
			t.Errorf("stats after the late panic %+v, want the permit back", s)
		}
	})
	if got := logs.String(); !strings.Contains(got, "(after its 504): late") || strings.Contains(got, "answered 500") {
		t.Errorf("log:\n%s\nwant the panic logged as after its 504", got)
	}
}

// Contrast: a panic before any deadline is answered 500, and says so.
func TestExecuteInPlacePanicInTimeLoggedAnswered(t *testing.T) {
	logs := captureLog(t)
	m, err := newFor(fakeFramework, Options{Timeout: time.Minute, AnswerPanics: true})
	if err != nil {
		t.Fatal(err)
	}
	err = m.executeInPlace(t.Context(), &fakeRequest{}, func(context.Context) error { panic("early") }, func(error) {})
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Errorf("ExecuteInPlace returned %v, want the *PanicError", err)
	}
	if got := logs.String(); !strings.Contains(got, "(answered 500): early") {
		t.Errorf("log:\n%s\nwant the panic logged as answered 500", got)
	}
}

// captureLog sends the standard logger's output to the returned builder
// until t ends (the package's tests do not run in parallel).
func captureLog(t *testing.T) *strings.Builder {
	var logs strings.Builder
	log.SetOutput(&logs)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	return &logs
}
