package inbound

import (
	"errors"
	"net/http"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// TestRetryAfterOnEvery503 protects the one answer per situation: every
// 503 carries Options.RetryAfter (1 s by default, rounded up to whole
// seconds, none when negative), shutting-down included; the 429 keeps the
// rate limiter's own wait.
func TestRetryAfterOnEvery503(t *testing.T) {
	errs := []error{
		&resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonFull},
		&resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonQueueTimeout},
		&resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonDropped},
		&resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonShuttingDown},
		resilience.ErrRejected,
	}
	for _, c := range []struct {
		opt  time.Duration
		want []string
	}{
		{0, []string{"1"}},
		{2500 * time.Millisecond, []string{"3"}},
		{time.Millisecond, []string{"1"}},
		{-1, nil},
	} {
		m, err := New(Options{RetryAfter: c.opt})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			resp, ok := m.render(e)
			if !ok || resp.Status != http.StatusServiceUnavailable {
				t.Fatalf("Render(%v) = %d, %v; want 503", e, resp.Status, ok)
			}
			if got := resp.Header.Values("Retry-After"); len(got) != len(c.want) || (len(got) == 1 && got[0] != c.want[0]) {
				t.Errorf("RetryAfter %v, %v: Retry-After %q, want %q", c.opt, e, got, c.want)
			}
			if resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("RetryAfter %v, %v: Content-Type %q", c.opt, e, resp.Header.Get("Content-Type"))
			}
		}
		resp, _ := m.render(&resilience.RateLimitRejectedError{RetryAfter: 7 * time.Second, Limit: 1})
		if got := resp.Header.Get("Retry-After"); got != "7" {
			t.Errorf("RetryAfter %v: 429 Retry-After %q, want the limiter's 7", c.opt, got)
		}
	}
}

func TestRetryAfterTooLargeIsConfigError(t *testing.T) {
	_, err := New(Options{RetryAfter: maxTimeout + 1})
	var ce *resilience.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Options.RetryAfter" {
		t.Fatalf("New = %v, want a *ConfigError for Options.RetryAfter", err)
	}
}

// Invariant: CapacityRetryAfter is the advice the 503s' Retry-After says,
// so the RPC adapters' retry advice agrees with it: the default second for
// 0, the value itself, and none for a negative value.
func TestCapacityRetryAfterResolvesOptions(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, DefaultRetryAfter}, {2500 * time.Millisecond, 2500 * time.Millisecond}, {-1, 0},
	} {
		m, err := New(Options{RetryAfter: tc.in, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.capacityRetryAfter(); got != tc.want {
			t.Errorf("RetryAfter %v: CapacityRetryAfter %v, want %v", tc.in, got, tc.want)
		}
	}
}
