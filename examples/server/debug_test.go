package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/ylcnfrht/resilience/core/inbound"
)

var debugLine = regexp.MustCompile(`(?m)^debug listener on (http://127\.0\.0\.1:[1-9][0-9]*) \(outside the middleware\):$`)

// debugURL waits for run's -debug-addr line and returns its address.
func debugURL(t *testing.T, stdout *syncBuffer, exited <-chan int) string {
	t.Helper()
	firstLine(t, stdout, exited)
	var base string
	waitFor(t, "the debug listener's line", func() bool {
		if m := debugLine.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
			return true
		}
		return false
	})
	return base
}

func getStatus(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Invariant: -framework grpc with -debug-addr serves, on a second, HTTP
// listener, the gRPC middleware's live /debug/limits (its configuration,
// and the counts of the calls made over gRPC), /readyz and /healthz; at
// shutdown /readyz fails there while the listener still answers, and
// the listener is closed once run returns.
func TestFrameworkGRPCDebugAddr(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"-framework", "grpc", "-debug-addr", "127.0.0.1:0", "-permit-limit", "3",
			"-queue-limit", "0", "-timeout", "300ms", "-ready-delay", "2s"}, &stdout, &stderr)
	}()
	m := grpcListeningLine.FindStringSubmatch(firstLine(t, &stdout, exited))
	if m == nil {
		t.Fatalf("first line does not match %v:\n%s", grpcListeningLine, stdout.String())
	}
	base := debugURL(t, &stdout, exited)
	client := &http.Client{Timeout: waitBound}
	if l := getLimits(t, client, base); l["limit"] != 3 || l["config.permitLimit"] != 3 || l["config.queueLimit"] != 0 {
		t.Fatalf("/debug/limits before any call: %v, want limit 3, queue 0", l)
	}
	for _, path := range []string{"/readyz", "/healthz"} {
		if code := getStatus(t, client, base+path); code != http.StatusOK {
			t.Fatalf("%s: %d, want 200", path, code)
		}
	}
	if code := getStatus(t, client, base+"/work?ms=1"); code != http.StatusNotFound {
		t.Fatalf("/work on the debug listener: %d, want 404 (the work is gRPC only)", code)
	}

	cooperativeThenLateWork(t, ctx, m[1])
	// The counts are the gRPC middleware's: monotonic, so read once both
	// calls have returned.
	if l := getLimits(t, client, base); l["admitted"] != 1 || l["timedOut"] != 1 {
		t.Fatalf("/debug/limits after the calls: %v, want 1 admitted (Cooperative), 1 timed out (Work)", l)
	}

	cancel() // the shutdown signal: /readyz fails at once, for -ready-delay and the drain
	waitFor(t, "/readyz on the debug listener to fail", func() bool {
		return getStatus(t, client, base+"/readyz") == http.StatusServiceUnavailable
	})
	if code := getStatus(t, client, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz during the shutdown: %d, want 200", code)
	}
	expectCleanExit(t, exited, &stderr, "")
	if c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://")); err == nil {
		c.Close()
		t.Fatal("the debug listener still accepts connections after run returned")
	}
}

// -debug-addr works beside an HTTP framework's own routes too (to keep
// the statistics off the public port), and an address it cannot listen
// on exits 1 naming the flag, having started nothing.
func TestDebugAddrHTTPFrameworkAndBadAddr(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"-debug-addr", "127.0.0.1:0", "-permit-limit", "4"}, &stdout, &stderr)
	}()
	base := debugURL(t, &stdout, exited)
	if l := getLimits(t, &http.Client{Timeout: waitBound}, base); l["limit"] != 4 {
		t.Fatalf("/debug/limits on the debug listener: %v, want limit 4", l)
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Fatalf("exit code %d, want 0; stderr:\n%s", code, stderr.String())
	}

	// A port taken by a listener of the test's own.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stderr = syncBuffer{}
	if code := run(t.Context(), []string{"-framework", "grpc", "-debug-addr", ln.Addr().String()}, io.Discard, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "-debug-addr: cannot listen") {
		t.Fatalf("a taken -debug-addr: exit %d, stderr %q; want 1 naming -debug-addr", code, stderr.String())
	}
}

// -debug-addr cannot change on a reload: its listener is opened once.
func TestConfigFileReloadRefusesDebugAddr(t *testing.T) {
	cur, err := parseConfig([]string{"-debug-addr", "127.0.0.1:0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := inbound.New(inboundOptions(cur))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reload(nil, cur, mw); err == nil || !strings.Contains(err.Error(), "-debug-addr:") {
		t.Fatalf("-debug-addr dropped on reload: %v, want a refusal naming -debug-addr", err)
	}
}
