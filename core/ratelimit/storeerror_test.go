package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestReasonOf protects the bounded cause of a store failure: a
// *StoreError's own reason however deeply wrapped, a bounded guess for
// plain errors, nothing for nil; and a StoreError still unwraps to its
// sentinel.
func TestReasonOf(t *testing.T) {
	sentinel := errors.New("budget")
	se := &StoreError{Reason: StoreClusterDown, Err: sentinel}
	for _, tc := range []struct {
		err  error
		want StoreReason
	}{
		{nil, ""},
		{se, StoreClusterDown},
		{fmt.Errorf("limiter: %w", se), StoreClusterDown},
		{&StoreError{Err: context.DeadlineExceeded}, StoreTimeout},
		{context.DeadlineExceeded, StoreTimeout},
		{fmt.Errorf("x: %w", context.Canceled), StoreCanceled},
		{errors.New("boom"), StoreOther},
	} {
		if got := ReasonOf(tc.err); got != tc.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if !errors.Is(fmt.Errorf("w: %w", se), sentinel) {
		t.Error("a StoreError does not unwrap to its error")
	}
	var got *StoreError
	if !errors.As(fmt.Errorf("w: %w", se), &got) || got.Reason != StoreClusterDown {
		t.Errorf("errors.As: %v", got)
	}
	if s := se.Error(); s != "rate limit store: cluster-down: budget" {
		t.Errorf("Error() = %q", s)
	}
	seen := map[StoreReason]bool{}
	for _, r := range StoreReasons {
		if r == "" || seen[r] {
			t.Errorf("StoreReasons: %q empty or repeated", r)
		}
		seen[r] = true
	}
}
