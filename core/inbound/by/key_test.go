package by_test

import (
	"context"
	"net/http"
	"net/netip"
	"testing"

	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
)

// The key functions read the view: a header's first value, the client's
// address; without a view, or without the header, the key is "".
func TestKeyFunctionsReadTheView(t *testing.T) {
	ctx := adapt.NewContext(context.Background(), &inbound.Request{
		Header:   http.Header{"X-Api-Key": {"k1", "k2"}},
		ClientIP: netip.MustParseAddr("192.0.2.7"),
	})
	if k := by.Header("x-api-key")(ctx); k != "k1" {
		t.Errorf("Header = %q, want the first value", k)
	}
	if k := by.Header("X-Missing")(ctx); k != "" {
		t.Errorf("missing header key = %q", k)
	}
	if k := by.ClientIP(ctx); k != "192.0.2.7" {
		t.Errorf("ClientIP = %q", k)
	}
	if k := by.ClientIP(context.Background()); k != "" {
		t.Errorf("ClientIP without a view = %q", k)
	}
	if k := by.Header("X-Api-Key")(context.Background()); k != "" {
		t.Errorf("Header without a view = %q", k)
	}
}
