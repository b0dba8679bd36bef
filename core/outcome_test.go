package resilience

import (
	"context"
	"errors"
	"testing"
)

// Invariant: ExecuteOutcome returns exactly what Execute returns, as one
// value, rejections included.
func TestExecuteOutcome(t *testing.T) {
	p := buildResult[int](t, nil, Retry(RetryOptions[int]{Delay: NoDelay, MaxRetryAttempts: 1}))
	o := p.ExecuteOutcome(context.Background(), succeed)
	if o.Failed() || o.Value != 1 {
		t.Fatalf("success outcome %+v", o)
	}
	o = p.ExecuteOutcome(context.Background(), fail)
	if v, err := o.Unpack(); !o.Failed() || v != 0 || err != errDependency {
		t.Fatalf("failure outcome %+v", o)
	}
	var nilPipeline *Pipeline[int]
	if o := nilPipeline.ExecuteOutcome(context.Background(), nil); !errors.Is(o.Err, ErrNilCallback) {
		t.Fatalf("nil callback: %+v", o)
	}
	if o := OutcomeOf(2, nil); o.Value != 2 || o.Failed() {
		t.Fatalf("OutcomeOf: %+v", o)
	}
}

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
