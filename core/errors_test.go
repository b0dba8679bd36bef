package resilience

import (
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
