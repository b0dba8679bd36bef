package adapt_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// TestRateLimitFields: the fields inbound sets on an admitted response of
// a rate-limited route, and on its 429, in either header style, are
// Retry-After and RateLimitFields' names, each of which some style sets;
// FieldKey lower-cases each without allocating.
func TestRateLimitFields(t *testing.T) {
	known := adapt.RateLimitFields()
	seen := map[string]bool{}
	for _, style := range []inbound.RateLimitHeaderStyle{inbound.RateLimitHeadersSplit, inbound.RateLimitHeadersStructured} {
		var mu sync.Mutex
		var set []string
		k, err := adapt.New(adapt.Framework{SetHeader: func(_ any, name, _ string) {
			mu.Lock()
			set = append(set, name)
			mu.Unlock()
		}}, inbound.Options{
			RateLimit:        &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Hour},
			RateLimitHeaders: style,
		})
		if err != nil {
			t.Fatal(err)
		}
		ok := func(context.Context) error { return nil }
		if err := k.Execute(context.Background(), nil, ok); err != nil {
			t.Fatalf("%s: first call: %v", style, err)
		}
		rejected := k.Execute(context.Background(), nil, ok)
		resp, sent := k.Render(rejected)
		if !sent || resp.Status != 429 {
			t.Fatalf("%s: second call %v rendered %d, want a 429", style, rejected, resp.Status)
		}
		names := set
		for name := range resp.Header {
			if name != "Content-Type" && name != "Retry-After" {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			t.Fatalf("%s: no RateLimit field set", style)
		}
		for _, name := range names {
			if !slices.Contains(known[:], name) {
				t.Errorf("%s: inbound sets %q, not in RateLimitFields %v", style, name, known)
			}
			seen[name] = true
		}
	}
	for _, name := range append(known[:], "Retry-After") {
		if name != "Retry-After" && !seen[name] {
			t.Errorf("RateLimitFields lists %q, which no header style sets", name)
		}
		if got := adapt.FieldKey(name); got != strings.ToLower(name) {
			t.Errorf("FieldKey(%q) = %q", name, got)
		}
		if n := testing.AllocsPerRun(10, func() { _ = adapt.FieldKey(name) }); n != 0 {
			t.Errorf("FieldKey(%q): %v allocations, want none", name, n)
		}
	}
	if got := adapt.FieldKey("X-Other"); got != "x-other" {
		t.Errorf("FieldKey(X-Other) = %q", got)
	}
}
