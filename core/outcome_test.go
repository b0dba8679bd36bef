package resilience

import (
	"context"
	"errors"
	"testing"
)

// Invariant: the shared default predicate handles errors but not a
// cancellation, wrapped or not, and never a plain value.
func TestDefaultShouldHandle(t *testing.T) {
	cases := []struct {
		o    Outcome[int]
		want bool
	}{
		{Outcome[int]{Value: 1}, false},
		{Outcome[int]{Err: errDependency}, true},
		{Outcome[int]{Err: context.DeadlineExceeded}, true},
		{Outcome[int]{Err: &TimeoutRejectedError{}}, true},
		{Outcome[int]{Err: context.Canceled}, false},
		{Outcome[int]{Err: errors.Join(errDependency, context.Canceled)}, false},
	}
	for _, c := range cases {
		if got := handlesFailure(c.o); got != c.want {
			t.Errorf("handlesFailure(%+v) = %v", c.o, got)
		}
	}
}
