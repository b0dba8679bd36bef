package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunServesEveryProtocol: the program serves Build and Follow to
// Connect, gRPC and gRPC-Web clients, refuses a tenant over its rate
// with ResourceExhausted while another tenant goes on, answers a call past
// -timeout with DeadlineExceeded, and shuts down cleanly.
func TestRunServesEveryProtocol(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	base, exited := start(t, ctx, []string{"-rate", "6", "-timeout", "300ms"}...)

	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	tenant := func(r interface{ Header() http.Header }, name string) { r.Header().Set("X-Tenant", name) }

	for _, opts := range [][]connect.ClientOption{nil, {connect.WithGRPC()}, {connect.WithGRPCWeb()}} {
		b := connect.NewClient[wrapperspb.Int64Value, wrapperspb.StringValue](hc, base+buildProcedure, opts...)
		req := connect.NewRequest(wrapperspb.Int64(1))
		tenant(req, "a")
		if res, err := b.CallUnary(t.Context(), req); err != nil || res.Msg.GetValue() != "report built in 1ms" {
			t.Fatalf("Build: %v, %v", res, err)
		}
		f := connect.NewClient[wrapperspb.Int64Value, wrapperspb.StringValue](hc, base+followProcedure, opts...)
		freq := connect.NewRequest(wrapperspb.Int64(2))
		tenant(freq, "a")
		st, err := f.CallServerStream(t.Context(), freq)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for st.Receive() {
			n++
		}
		if st.Err() != nil || n != 2 {
			t.Fatalf("Follow: %d messages, %v", n, st.Err())
		}
		_ = st.Close()
	}
	// Tenant a has made its 6 calls this second (or the window turned, and
	// a few more calls spend it again).
	b := connect.NewClient[wrapperspb.Int64Value, wrapperspb.StringValue](hc, base+buildProcedure, connect.WithGRPC())
	deadline := time.Now().Add(10 * time.Second)
	for {
		req := connect.NewRequest(wrapperspb.Int64(0))
		tenant(req, "a")
		_, err := b.CallUnary(t.Context(), req)
		if connect.CodeOf(err) == connect.CodeResourceExhausted {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("tenant a over its rate: %v, want ResourceExhausted", err)
		}
	}
	req := connect.NewRequest(wrapperspb.Int64(5000))
	tenant(req, "b")
	if _, err := b.CallUnary(t.Context(), req); connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		t.Errorf("Build past -timeout for tenant b: %v, want DeadlineExceeded", err)
	}
	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no shutdown")
	}
}

// TestShutdownDrains: at shutdown a queued call is refused Unavailable
// with the shutting-down reason at once, rather than waiting for the
// permit and running, while the running call finishes within the grace
// and the program exits 0.
func TestShutdownDrains(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	base, exited := start(t, ctx, []string{"-permit-limit", "1", "-queue-limit", "1", "-queue-timeout", "1m", "-timeout", "1m"}...)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	b := connect.NewClient[wrapperspb.Int64Value, wrapperspb.StringValue](hc, base+buildProcedure, connect.WithGRPC())
	call := func(ms int64) <-chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := b.CallUnary(t.Context(), connect.NewRequest(wrapperspb.Int64(ms)))
			ch <- err
		}()
		return ch
	}
	limits := func() (inflight, queued int) {
		resp, err := hc.Get(base + "/debug/limits")
		if err != nil {
			return -1, -1
		}
		defer resp.Body.Close()
		var s struct{ InFlight, Queued int }
		_ = json.NewDecoder(resp.Body).Decode(&s)
		return s.InFlight, s.Queued
	}
	waitLimits := func(inflight, queued int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if i, q := limits(); i == inflight && q == queued {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for inflight %d, queued %d", inflight, queued)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	running := call(1500)
	waitLimits(1, 0)
	queued := call(0)
	waitLimits(1, 1)
	cancel()
	select {
	case err := <-queued:
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable {
			t.Fatalf("queued call at shutdown: %v, want Unavailable", err)
		}
		if !strings.Contains(detailsText(ce), "shutting-down") {
			t.Errorf("queued call at shutdown: details %q, want the shutting-down reason", detailsText(ce))
		}
	case <-running:
		t.Fatal("the running call finished before the queued one was answered: the queue was not drained")
	case <-time.After(10 * time.Second):
		t.Fatal("the queued call was not answered")
	}
	if err := <-running; err != nil {
		t.Errorf("the running call: %v, want it to finish", err)
	}
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no shutdown")
	}
}

// detailsText is the error details' bytes as text, where the ErrorInfo's
// strings can be found.
func detailsText(e *connect.Error) string {
	var sb strings.Builder
	for _, d := range e.Details() {
		sb.Write(d.Bytes())
	}
	return sb.String()
}

// start runs the example with args until ctx ends and returns the address
// it listens on and a channel that receives its exit code.
func start(t *testing.T, ctx context.Context, args ...string) (string, <-chan int) {
	t.Helper()
	pr, pw := io.Pipe()
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, args, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on http://") {
		t.Fatalf("first line %q, %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return strings.TrimSpace(strings.TrimPrefix(line, "listening on ")), exited
}
