package resiliencegrpc_test

import (
	"context"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// seen is what a key function saw of a call.
type seen struct {
	method, path, route, tenant string
	ip                          netip.Addr
	call                        resiliencegrpc.Call
	callOK                      bool
	incoming                    []string
}

// TestRequestView: key functions see the full method as route and path,
// the incoming metadata as headers, the peer as client address, and the
// RPC's context typed through CallFrom and grpc-go's own accessors.
func TestRequestView(t *testing.T) {
	var mu sync.Mutex
	var got seen
	key := func(ctx context.Context) string {
		v, _ := inbound.RequestFrom(ctx)
		c, ok := resiliencegrpc.CallFrom(ctx)
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		got = seen{method: v.Method, path: v.Path, route: v.Route(), tenant: v.Header.Get("X-Tenant"), ip: v.ClientIP, call: c, callOK: ok, incoming: md.Get("x-tenant")}
		mu.Unlock()
		return ""
	}
	s := start(t, inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1000, Window: time.Hour, Key: key}}, &service{}, viaRegistrar)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "acme")
	if r := receive(t, "call", s.callUnary(ctx)); r.err != nil {
		t.Fatal(r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	const method = "/grpc.testing.TestService/UnaryCall"
	if got.method != "POST" || got.path != method || got.route != method {
		t.Errorf("method %q path %q route %q, want POST and %s", got.method, got.path, got.route, method)
	}
	if got.tenant != "acme" || len(got.incoming) != 1 {
		t.Errorf("header x-tenant %q, incoming metadata %q, want acme", got.tenant, got.incoming)
	}
	if got.ip != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("client IP %v, want 127.0.0.1", got.ip)
	}
	if !got.callOK || got.call.FullMethod != method || got.call.Peer == nil || got.call.Metadata.Get("x-tenant")[0] != "acme" || got.call.Context == nil {
		t.Errorf("CallFrom: %+v %v, want the call", got.call, got.callOK)
	}
}

// TestCallFromOutsideAView: CallFrom reports false for a context that
// carries no call.
func TestCallFromOutsideAView(t *testing.T) {
	if _, ok := resiliencegrpc.CallFrom(context.Background()); ok {
		t.Error("CallFrom(Background) reported a call")
	}
	ctx := adapt.NewContext(context.Background(), &inbound.Request{Raw: 42})
	if _, ok := resiliencegrpc.CallFrom(ctx); ok {
		t.Error("CallFrom reported a call for a view of another framework")
	}
}

// TestAdaptiveLimiter: the adaptive limiter fronts calls like the fixed one.
func TestAdaptiveLimiter(t *testing.T) {
	s := start(t, inbound.Options{Adaptive: &resilience.AdaptiveLimiterOptions{}}, &service{}, viaRegistrar)
	for range 10 {
		if r := receive(t, "call", s.callUnary(context.Background())); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if st := s.mw.Stats(); st.Limit <= 0 || st.InFlight != 0 {
		t.Errorf("stats %+v, want a limit and nothing in flight", st)
	}
}
