package resilience

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// Invariant: every rejection matches its sentinel and ErrRejected, also when
// wrapped, and nothing else.
func TestRejectionErrorsMatchTheirSentinels(t *testing.T) {
	cases := []struct {
		err  error
		want error
	}{
		{&ConcurrencyLimitRejectedError{Reason: ReasonFull}, ErrConcurrencyLimitRejected},
		{&TimeoutRejectedError{}, ErrTimeoutRejected},
		{&RateLimitRejectedError{}, ErrRateLimitRejected},
	}
	sentinels := []error{ErrConcurrencyLimitRejected, ErrTimeoutRejected, ErrRateLimitRejected}
	for _, c := range cases {
		wrapped := fmt.Errorf("handler: %w", c.err)
		if !errors.Is(wrapped, c.want) || !errors.Is(wrapped, ErrRejected) {
			t.Errorf("%T does not match %v and ErrRejected", c.err, c.want)
		}
		for _, s := range sentinels {
			if s != c.want && errors.Is(wrapped, s) {
				t.Errorf("%T matches %v", c.err, s)
			}
		}
		if c.err.Error() == "" {
			t.Errorf("%T has an empty message", c.err)
		}
	}
	if errors.Is(&ConfigError{Field: "X"}, ErrRejected) || !errors.Is(&ConfigError{Field: "X"}, ErrInvalidOptions) {
		t.Error("ConfigError sentinel matching is wrong")
	}
}

// The deprecated names match the limiter's rejections as before.
func TestBulkheadNamesStillMatch(t *testing.T) {
	l, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{PermitLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !l.TryAcquire() {
		t.Fatal("no free permit")
	}
	defer l.Release()
	err = l.Execute(context.Background(), Telemetry{}, func(context.Context) error { return nil })
	var be *BulkheadRejectedError
	if !errors.Is(err, ErrBulkheadRejected) || !errors.As(err, &be) || be.Reason != ReasonFull {
		t.Fatalf("got %v, want a full rejection matched by the deprecated names", err)
	}
}
