package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Invariant: -framework connect serves the plain routes with the same
// behaviour as chi: the same statuses, rejections carrying the same code
// and reason (as the ErrorInfo detail of Connect's error body).
func TestFrameworkConnect(t *testing.T) { runAsFramework(t, "connect") }

// connectStatus is the HTTP status of each Connect code a rejection uses.
var connectStatus = map[string]int{
	"unavailable":        http.StatusServiceUnavailable,
	"deadline_exceeded":  http.StatusGatewayTimeout,
	"resource_exhausted": http.StatusTooManyRequests,
}

// connectRejection reads a Connect error body (code, message, details)
// into the fields the shared tests check: code and reason from its
// google.rpc.ErrorInfo detail. The Connect code must be the status's.
func connectRejection(status int, body map[string]any) (map[string]any, error) {
	if want, ok := connectStatus[fmt.Sprint(body["code"])]; !ok || want != status {
		return nil, fmt.Errorf("Connect code %v under status %d", body["code"], status)
	}
	details, _ := body["details"].([]any)
	for _, d := range details {
		m, _ := d.(map[string]any)
		if m["type"] != "google.rpc.ErrorInfo" {
			continue
		}
		raw, err := connect.DecodeBinaryHeader(fmt.Sprint(m["value"]))
		if err != nil {
			return nil, err
		}
		out := map[string]any{"message": body["message"]}
		// ErrorInfo: 1 reason, 2 domain, 3 metadata entries (1 key, 2 value).
		for len(raw) > 0 {
			num, typ, n := protowire.ConsumeTag(raw)
			if n < 0 || typ != protowire.BytesType {
				return nil, errors.New("malformed ErrorInfo")
			}
			v, m := protowire.ConsumeBytes(raw[n:])
			if m < 0 {
				return nil, errors.New("malformed ErrorInfo")
			}
			raw = raw[n+m:]
			switch num {
			case 1:
				out["code"] = string(v)
			case 3:
				var key, val string
				for len(v) > 0 {
					num, _, n := protowire.ConsumeTag(v)
					s, m := protowire.ConsumeString(v[max(n, 0):])
					if n < 0 || m < 0 {
						return nil, errors.New("malformed ErrorInfo metadata")
					}
					if num == 1 {
						key = s
					} else {
						val = s
					}
					v = v[n+m:]
				}
				if key == "reason" {
					out["reason"] = val
				}
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("no ErrorInfo detail in %v", body)
}

// startConnect serves -framework connect with args on loopback, HTTP/1.1
// and h2c as run serves it, and returns it with a client speaking both.
func startConnect(t *testing.T, args ...string) (*testServer, *http.Client) {
	t.Helper()
	return startH2C(t, "connect", args...)
}

// startH2C serves framework with args on loopback, HTTP/1.1 and h2c as
// run serves it, and returns it with a client speaking h2c.
func startH2C(t *testing.T, framework string, args ...string) (*testServer, *http.Client) {
	t.Helper()
	cfg, err := parseConfig(append([]string{"-framework", framework}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	h, mw, err := newServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = serverProtocols()
	srv.Start()
	t.Cleanup(srv.Close)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &testServer{url: srv.URL, mw: mw, client: newClient(t)}, &http.Client{Transport: tr}
}

func workClient(c *http.Client, base, procedure string, opts ...connect.ClientOption) *connect.Client[wrapperspb.Int64Value, wrapperspb.StringValue] {
	return connect.NewClient[wrapperspb.Int64Value, wrapperspb.StringValue](c, base+procedure, opts...)
}

// Invariant: with -framework connect the plain routes and the Connect
// procedures share one limit: while a plain GET holds the only permit, a
// Work call is refused Unavailable in Connect and gRPC, and a plain GET
// 503; the diagnostic routes still answer; then everything runs again.
func TestConnectRoutesShareTheLimit(t *testing.T) {
	s, h2 := startConnect(t, "-permit-limit", "1", "-queue-limit", "0", "-timeout", "1m")
	got, err := workClient(h2, s.url, workProcedure).CallUnary(t.Context(), connect.NewRequest(wrapperspb.Int64(0)))
	if err != nil || got.Msg.GetValue() != "worked 0s" {
		t.Fatalf("Work: %v, %v", got, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	held := s.async(ctx, "/cooperative?ms=60000")
	waitFor(t, "the plain request running", func() bool { return s.mw.Stats().InFlight == 1 })
	for _, opts := range [][]connect.ClientOption{nil, {connect.WithGRPC()}, {connect.WithGRPCWeb()}} {
		_, err := workClient(h2, s.url, workProcedure, opts...).CallUnary(t.Context(), connect.NewRequest(wrapperspb.Int64(0)))
		if connect.CodeOf(err) != connect.CodeUnavailable {
			t.Errorf("Work while full: %v, want Unavailable", err)
		}
	}
	if r := s.get(t.Context(), "/work?ms=0"); r.status != http.StatusServiceUnavailable {
		t.Errorf("GET /work while full: %d, want 503", r.status)
	}
	if r := s.get(t.Context(), "/healthz"); r.status != http.StatusOK {
		t.Errorf("GET /healthz while full: %d, want 200", r.status)
	}
	if m := getLimits(t, s.client, s.url); m["inflight"] != 1 {
		t.Errorf("/debug/limits %v, want inflight 1", m)
	}
	cancel()
	<-held
	s.waitIdle(t)
	if _, err := workClient(h2, s.url, cooperativeProcedure, connect.WithGRPC()).CallUnary(t.Context(), connect.NewRequest(wrapperspb.Int64(1))); err != nil {
		t.Errorf("Cooperative after the permit came back: %v", err)
	}
}

// Invariant: a Work call (ignoring its context) past -timeout is answered
// DeadlineExceeded on time over gRPC, keeps its permit while it sleeps and
// shows in /debug/limits as late.
func TestConnectWorkPastTimeout(t *testing.T) {
	s, h2 := startConnect(t, "-permit-limit", "2", "-timeout", "200ms")
	_, err := workClient(h2, s.url, workProcedure, connect.WithGRPC()).CallUnary(t.Context(), connect.NewRequest(wrapperspb.Int64(1500)))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeDeadlineExceeded {
		t.Fatalf("Work past the timeout: %v, want DeadlineExceeded", err)
	}
	if m := getLimits(t, s.client, s.url); m["late"] != 1 || m["inflight"] != 1 {
		t.Errorf("/debug/limits right after the answer: %v, want late 1, inflight 1", m)
	}
	waitFor(t, "the late handler to return", func() bool { m := getLimits(t, s.client, s.url); return m["late"] == 0 && m["inflight"] == 0 })
}
