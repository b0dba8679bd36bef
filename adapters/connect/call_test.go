package resilienceconnect_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// seen is what a key function saw of one call.
type seen struct {
	route, procedure, protocol, peerProtocol, tenant string
	peerAddr                                         bool
	spec                                             connect.Spec
	specKnown                                        bool
}

type viewRecorder struct {
	mu   sync.Mutex
	last seen
}

func (vr *viewRecorder) key(ctx context.Context) string {
	v, _ := inbound.RequestFrom(ctx)
	c, ok := resilienceconnect.CallFrom(ctx)
	if !ok {
		return ""
	}
	spec, known := c.Spec()
	vr.mu.Lock()
	vr.last = seen{route: v.Route(), procedure: c.Procedure, protocol: c.Protocol(), peerProtocol: c.Peer().Protocol,
		tenant: c.Header.Get("X-Tenant"), peerAddr: c.Peer().Addr != "", spec: spec, specKnown: known}
	vr.mu.Unlock()
	return c.Procedure
}

func (vr *viewRecorder) get() seen {
	vr.mu.Lock()
	defer vr.mu.Unlock()
	return vr.last
}

// TestCallView: priority and key functions see each call's procedure as
// the view's Route, its protocol, peer and headers, and its connect.Spec
// (stream type) when the handlers were built with HandlerOption, in every
// protocol and call shape.
func TestCallView(t *testing.T) {
	vr := &viewRecorder{}
	ts := startServer(t, inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1000, Window: time.Hour, Key: vr.key}})
	for _, p := range protocols {
		wantProtocol := map[string]string{"connect": connect.ProtocolConnect, "grpc": connect.ProtocolGRPC, "grpcweb": connect.ProtocolGRPCWeb}[p.name]
		check := func(procedure string, st connect.StreamType) {
			t.Helper()
			got := vr.get()
			want := seen{route: procedure, procedure: procedure, protocol: wantProtocol, peerProtocol: wantProtocol,
				tenant: "acme", peerAddr: true, specKnown: true}
			if got.spec.Procedure != procedure || got.spec.StreamType != st {
				t.Errorf("%s %s: spec %+v, want procedure %s, stream type %v", p.name, procedure, got.spec, procedure, st)
			}
			got.spec = connect.Spec{}
			if got != want {
				t.Errorf("%s %s: saw %+v, want %+v", p.name, procedure, got, want)
			}
		}
		req := connect.NewRequest(wrapperspb.String("x"))
		req.Header().Set("X-Tenant", "acme")
		if _, err := ts.say(p).CallUnary(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		check(sayProcedure, connect.StreamTypeUnary)
		req = connect.NewRequest(wrapperspb.String("x"))
		req.Header().Set("X-Tenant", "acme")
		st, err := ts.count(p).CallServerStream(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		for st.Receive() {
		}
		_ = st.Close()
		check(countProcedure, connect.StreamTypeServer)
		bidi := ts.chat(p).CallBidiStream(t.Context())
		bidi.RequestHeader().Set("X-Tenant", "acme")
		_ = bidi.Send(wrapperspb.String("x"))
		_, _ = bidi.Receive()
		_ = bidi.CloseRequest()
		_ = bidi.CloseResponse()
		check(chatProcedure, connect.StreamTypeBidi)
	}
}

// TestSpecUnknownWithoutHandlerOption: without HandlerOption a call's Spec
// has only its procedure, and says so.
func TestSpecUnknownWithoutHandlerOption(t *testing.T) {
	vr := &viewRecorder{}
	mw, err := resilienceconnect.New(inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 10, Window: time.Hour, Key: vr.key}})
	if err != nil {
		t.Fatal(err)
	}
	svc := newService()
	srv := httptest.NewServer(mw.Handler(svc.mux()))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	c := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](srv.Client(), srv.URL+sayProcedure)
	if _, err := c.CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x"))); err != nil {
		t.Fatal(err)
	}
	if got := vr.get(); got.specKnown || got.spec != (connect.Spec{Procedure: sayProcedure}) {
		t.Errorf("spec %+v known %v, want only the procedure, unknown", got.spec, got.specKnown)
	}
}

// TestRenderOnlyOverConnectUnary: Options.Render restyles a rejection
// sent over the Connect protocol's unary mapping (its default is Connect's
// own error, metadata included), while gRPC and gRPC-Web callers keep
// their protocol's error.
func TestRenderOnlyOverConnectUnary(t *testing.T) {
	var sawDefault atomic.Value
	ts := startServer(t, inbound.Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
		Render: func(err error, def inbound.Response) inbound.Response {
			sawDefault.Store(def.Status == http.StatusServiceUnavailable && def.Header.Get("Retry-After") == "1" &&
				strings.Contains(string(def.Body), `"code":"unavailable"`) && errors.Is(err, resilience.ErrConcurrencyLimitRejected))
			return inbound.Response{Status: http.StatusTeapot, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("busy")}
		},
	})
	held, resp, body := postBesideAHeldCall(t, ts)
	if resp.StatusCode != http.StatusTeapot || string(body) != "busy" {
		t.Errorf("Connect unary rejection: %d %q, want Render's 418 \"busy\"", resp.StatusCode, body)
	}
	if ok, _ := sawDefault.Load().(bool); !ok {
		t.Errorf("Render did not get the bulkhead error with Connect's 503 error as its default")
	}
	for _, p := range protocols[1:] {
		_, err := ts.say(p).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x")))
		expectCode(t, p.name, err, connect.CodeUnavailable, inbound.CodeBulkheadFull, "full")
	}
	ts.svc.open()
	if err := await(t, "held call", held); err != nil {
		t.Error(err)
	}
}

// TestRenderPanicGivesDefault: a Render hook that panics while
// restyling a Connect unary rejection gives Connect's own error, and is
// reported as event.HookPanic, as inbound's own Render hook is: the
// process and the answer survive it.
func TestRenderPanicGivesDefault(t *testing.T) {
	var panics atomic.Int32
	ts := startServer(t, inbound.Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
		Render:      func(error, inbound.Response) inbound.Response { panic("bug") },
		Listener: event.ListenerFunc(func(_ context.Context, e event.Event) {
			if e.Name == event.HookPanic && e.Reason == event.HookRender {
				panics.Add(1)
			}
		}),
	})
	held, resp, body := postBesideAHeldCall(t, ts)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"unavailable"`) {
		t.Errorf("Connect unary rejection: %d %q, want Connect's own 503 unavailable", resp.StatusCode, body)
	}
	if n := panics.Load(); n != 1 {
		t.Errorf("%d HookPanic events of Options.Render, want 1", n)
	}
	ts.svc.open()
	if err := await(t, "held call", held); err != nil {
		t.Error(err)
	}
}

// TestRouteIsProcedureUnderServicePrefix: mounted the way generated code
// mounts a service (an outer ServeMux's subtree pattern
// "/test.v1.EchoService/"), the view's Route is still the procedure; a
// plain route an outer mux matched by a wildcard pattern keeps it.
func TestRouteIsProcedureUnderServicePrefix(t *testing.T) {
	vr := &viewRecorder{}
	mw, err := resilienceconnect.New(inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 10, Window: time.Hour, Key: vr.key}})
	if err != nil {
		t.Fatal(err)
	}
	svc := newService()
	outer := http.NewServeMux()
	outer.Handle("/test.v1.EchoService/", mw.Handler(svc.mux()))
	outer.Handle("GET /users/{id}", mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	srv := httptest.NewServer(outer)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	c := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](srv.Client(), srv.URL+sayProcedure)
	if _, err := c.CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x"))); err != nil {
		t.Fatal(err)
	}
	if got := vr.get().route; got != sayProcedure {
		t.Errorf("Route under the service prefix %q, want the procedure %q", got, sayProcedure)
	}
	resp, err := srv.Client().Get(srv.URL + "/users/7")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := vr.get(); got.route != "/users/{id}" || got.procedure != "/users/7" {
		t.Errorf("plain route: Route %q, Procedure %q; want /users/{id}, /users/7", got.route, got.procedure)
	}
}

// A Render hook restyles connect's own errors, yet it is part of the
// options like any other: Options returns it and Reconfigure accepts the
// options New was given (it was refused as "added" while the adapter
// kept the hook out of the options).
func TestReconfigureKeepsARenderHook(t *testing.T) {
	opts := inbound.Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2},
		Render:      func(err error, def inbound.Response) inbound.Response { return def },
	}
	m, err := resilienceconnect.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if m.Inbound().Options().Render == nil {
		t.Fatal("Options().Render is nil, want the hook given to New")
	}
	opts.Concurrency = &resilience.ConcurrencyLimiterOptions{PermitLimit: 5}
	if err := m.Inbound().Reconfigure(opts); err != nil {
		t.Fatalf("Reconfigure with New's Render: %v", err)
	}
	if got := m.Stats().Limit; got != 5 {
		t.Fatalf("limit %d after Reconfigure, want 5", got)
	}
}

// postBesideAHeldCall holds the only permit with a call, then posts a
// Connect unary request, which is rejected; it returns the held call,
// the response and its body.
func postBesideAHeldCall(t *testing.T, ts *testServer) (<-chan error, *http.Response, []byte) {
	t.Helper()
	held := ts.callSay(t.Context(), protocols[1], msgHold)
	ts.svc.waitEntered(t, sayProcedure)
	resp, err := ts.client.Post(ts.url+sayProcedure, "application/json", strings.NewReader(`"x"`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return held, resp, body
}
