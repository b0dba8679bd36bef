package inbound

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

type ctxKey struct{}

// Invariant: the context Execute gives its callback under Options.Timeout
// behaves as context.WithTimeoutCause's: it reports the deadline (the
// parent's, if earlier), carries the parent's values, ends at the timeout
// with context.DeadlineExceeded and the *resilience.TimeoutRejectedError as
// its cause (and Execute returns that error), ends with the parent when
// the parent ends first (Execute then returns the callback's own error),
// and is cancelled once Execute returns.
func TestExecuteTimeoutContext(t *testing.T) {
	const timeout = time.Second
	type seen struct {
		deadline    time.Time
		hasDeadline bool
		value       any
		err, cause  error
		waited      time.Duration
	}
	run := func(t *testing.T, parent context.Context, fnErr error) (seen, context.Context, error) {
		m := mustNew(t, Options{Timeout: timeout})
		var s seen
		var fnCtx context.Context
		err := m.execute(parent, nil, func(ctx context.Context) error {
			fnCtx = ctx
			s.deadline, s.hasDeadline = ctx.Deadline()
			s.value = ctx.Value(ctxKey{})
			start := time.Now()
			<-ctx.Done()
			s.waited = time.Since(start)
			s.err, s.cause = ctx.Err(), context.Cause(ctx)
			return fnErr
		})
		return s, fnCtx, err
	}
	t.Run("timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			s, fnCtx, err := run(t, context.WithValue(context.Background(), ctxKey{}, "v"), errors.New("fn's own"))
			if !s.hasDeadline || !s.deadline.Equal(start.Add(timeout)) || s.value != "v" {
				t.Errorf("deadline %v (%v), value %v; want %v and the parent's value", s.deadline, s.hasDeadline, s.value, start.Add(timeout))
			}
			if s.waited != timeout || !errors.Is(s.err, context.DeadlineExceeded) || !errors.Is(s.cause, resilience.ErrTimeoutRejected) {
				t.Errorf("ended after %v with %v, cause %v; want %v, DeadlineExceeded, the timeout rejection", s.waited, s.err, s.cause, timeout)
			}
			var te *resilience.TimeoutRejectedError
			if !errors.As(err, &te) {
				t.Errorf("Execute returned %v, want the *resilience.TimeoutRejectedError", err)
			}
			if fnCtx.Err() == nil {
				t.Error("the callback's context is live after Execute returned")
			}
		})
	})
	t.Run("earlier parent deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			parent, cancel := context.WithTimeout(context.Background(), timeout/4)
			defer cancel()
			fnErr := errors.New("fn's own")
			s, _, err := run(t, parent, fnErr)
			if !s.deadline.Equal(start.Add(timeout/4)) || s.waited != timeout/4 {
				t.Errorf("deadline %v, ended after %v; want the parent's, %v", s.deadline, s.waited, timeout/4)
			}
			if !errors.Is(s.err, context.DeadlineExceeded) || errors.Is(s.cause, resilience.ErrTimeoutRejected) || err != fnErr {
				t.Errorf("ended with %v, cause %v, Execute returned %v; want the parent's DeadlineExceeded and fn's error", s.err, s.cause, err)
			}
		})
	})
	t.Run("parent cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, cancel := context.WithCancelCause(context.Background())
			why := errors.New("client left")
			time.AfterFunc(timeout/2, func() { cancel(why) })
			s, _, err := run(t, parent, nil)
			if s.waited != timeout/2 || !errors.Is(s.err, context.Canceled) || s.cause != why || err != nil {
				t.Errorf("ended after %v with %v, cause %v, Execute returned %v; want the parent's cancellation at %v", s.waited, s.err, s.cause, err, timeout/2)
			}
		})
	})
}
