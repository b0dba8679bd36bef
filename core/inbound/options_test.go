package inbound

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Invalid options are a *ConfigError naming the field, never a panic per
// request.
func TestOptionsValidation(t *testing.T) {
	p, err := resilience.NewBuilder[struct{}]().Build()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		opts  Options
		field string
	}{
		{"negative timeout", Options{Timeout: -time.Second}, "Options.Timeout"},
		{"huge timeout", Options{Timeout: 200 * 365 * 24 * time.Hour}, "Options.Timeout"},
		{"concurrency and pipeline", Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}, Pipeline: p}, "Options.Pipeline"},
		{"header style", Options{RateLimitHeaders: "bogus"}, "Options.RateLimitHeaders"},
		{"ipv6 prefix", Options{ClientIP: ClientIPOptions{IPv6Prefix: 129}}, "ClientIPOptions.IPv6Prefix"},
		{"negative ipv6 prefix", Options{ClientIP: ClientIPOptions{IPv6Prefix: -1}}, "ClientIPOptions.IPv6Prefix"},
		{"invalid proxy prefix", Options{ClientIP: ClientIPOptions{TrustedProxies: []netip.Prefix{{}}}}, "ClientIPOptions.TrustedProxies"},
		{"permit limit", Options{Concurrency: &resilience.ConcurrencyLimiterOptions{}}, "ConcurrencyLimiterOptions.PermitLimit"},
		{"rate window", Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1}}, "RateLimiterOptions.Window"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := New(c.opts)
			var ce *resilience.ConfigError
			if m != nil || !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, resilience.ErrInvalidOptions) {
				t.Fatalf("New = %v, %v; want a ConfigError for %s", m, err, c.field)
			}
		})
	}
	if mw, err := New(Options{}); err != nil || mw == nil {
		t.Fatalf("zero Options: %v", err)
	}
}

// FuzzOptions: validation never panics, and either builds a working
// middleware or returns a *ConfigError.
func FuzzOptions(f *testing.F) {
	f.Add(int64(time.Second), 10, 5, int64(time.Millisecond), "", 0, 10, int64(time.Second), false, "")
	f.Add(int64(-1), 0, -1, int64(-1), "bogus", 200, 0, int64(0), true, "bogus")
	f.Add(int64(0), 1, 0, int64(0), " Structured", 64, 1, int64(1), false, string(resilience.OverflowDropLowestPriority))
	f.Fuzz(func(t *testing.T, timeout int64, permits, queue int, queueTimeout int64, style string, prefix, rate int, window int64, both bool, overflow string) {
		opts := Options{
			Timeout:          time.Duration(timeout),
			Concurrency:      &resilience.ConcurrencyLimiterOptions{PermitLimit: permits, QueueLimit: queue, QueueTimeout: time.Duration(queueTimeout), Overflow: resilience.OverflowPolicy(overflow)},
			RateLimitHeaders: RateLimitHeaderStyle(style),
			ClientIP:         ClientIPOptions{IPv6Prefix: prefix},
		}
		if rate != 0 {
			opts.RateLimit = &resilience.RateLimiterOptions{PermitLimit: rate, Window: time.Duration(window)}
		}
		if both {
			opts.Pipeline = &resilience.Pipeline[struct{}]{}
		}
		m, err := New(opts)
		if err != nil {
			var ce *resilience.ConfigError
			if !errors.As(err, &ce) || ce.Field == "" {
				t.Fatalf("error %v is not a ConfigError naming a field", err)
			}
			return
		}
		if m == nil {
			t.Fatal("nil middleware without error")
		}
		_ = m.Stats()
	})
}
