package resilience

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ylcnfrht/resilience/core/limit"
)

// A limiter's parts that cannot change live are refused by name, as a
// *NotLiveError that matches ErrNotLive and unwraps to a *ConfigError;
// an invalid value is the constructor's *ConfigError; either way nothing
// changes.
func TestLimiterReconfigureRefusals(t *testing.T) {
	prio := func(context.Context) int { return 0 }
	l, _ := NewConcurrencyLimiter(ConcurrencyLimiterOptions{PermitLimit: 3, Priority: prio})
	a, _ := NewAdaptiveLimiter(AdaptiveLimiterOptions{InitialLimit: 5, MaxLimit: 10})
	r, _ := NewRateLimiter(RateLimiterOptions{PermitLimit: 5, Window: time.Second})
	flow := func(context.Context) string { return "" }
	for _, tc := range []struct {
		field   string
		notLive bool
		err     error
	}{
		{"ConcurrencyLimiterOptions.PermitLimit", false, l.Reconfigure(ConcurrencyLimiterOptions{PermitLimit: 0, Priority: prio})},
		{"ConcurrencyLimiterOptions.Priority", true, l.Reconfigure(ConcurrencyLimiterOptions{PermitLimit: 4})},
		{"ConcurrencyLimiterOptions.Name", true, l.Reconfigure(ConcurrencyLimiterOptions{PermitLimit: 4, Priority: prio, Name: "x"})},
		{"ConcurrencyLimiterOptions.Flow", true, l.Reconfigure(ConcurrencyLimiterOptions{PermitLimit: 4, Priority: prio, Flow: flow})},
		{"AdaptiveLimiterOptions.MinLimit", false, a.Reconfigure(AdaptiveLimiterOptions{MinLimit: 20, MaxLimit: 10})},
		{"AdaptiveLimiterOptions.Algorithm", true, a.Reconfigure(AdaptiveLimiterOptions{Algorithm: &limit.AIMD{}})},
		{"AdaptiveLimiterOptions.IgnoreCPUWait", true, a.Reconfigure(AdaptiveLimiterOptions{IgnoreCPUWait: true})},
		{"RateLimiterOptions.Window", false, r.Reconfigure(RateLimiterOptions{PermitLimit: 5})},
		{"RateLimiterOptions.FailClosed", true, r.Reconfigure(RateLimiterOptions{PermitLimit: 5, Window: time.Second, FailClosed: true})},
		{"RateLimiterOptions.MaxKeys", true, r.Reconfigure(RateLimiterOptions{PermitLimit: 5, Window: time.Second, MaxKeys: 7})},
	} {
		var ce *ConfigError
		if !errors.As(tc.err, &ce) || ce.Field != tc.field || errors.Is(tc.err, ErrNotLive) != tc.notLive {
			t.Errorf("%s: got %v", tc.field, tc.err)
		}
		var nl *NotLiveError
		if errors.As(tc.err, &nl) != tc.notLive {
			t.Errorf("%s: %T", tc.field, tc.err)
		}
	}
	if l.Stats().Limit != 3 || a.Stats().Limit != 5 || r.Policy().Limit != 5 {
		t.Fatalf("changed: %v %v %v", l.Stats(), a.Stats(), r.Policy())
	}
	// A limiter with a Flow function built without a queue cannot gain
	// one (it has no fair queue).
	f, _ := NewConcurrencyLimiter(ConcurrencyLimiterOptions{PermitLimit: 1, Flow: flow})
	if err := f.Reconfigure(ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 2, Flow: flow}); !errors.Is(err, ErrNotLive) {
		t.Fatalf("fair queue added: %v", err)
	}
	// The algorithm given at construction may be passed again.
	alg := &limit.AIMD{}
	b, _ := NewAdaptiveLimiter(AdaptiveLimiterOptions{Algorithm: alg, InitialLimit: 5})
	if err := b.Reconfigure(AdaptiveLimiterOptions{Algorithm: alg, MaxLimit: 4}); err != nil || b.Stats().Limit != 4 {
		t.Fatalf("same algorithm: %v, limit %d", err, b.Stats().Limit)
	}
}
