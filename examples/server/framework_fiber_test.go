package main

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// startRun runs the program with args and returns its base URL; the run is
// shut down (and must exit 0) when the test ends.
func startRun(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, args, &stdout, &stderr) }()
	m := listeningLine.FindStringSubmatch(firstLine(t, &stdout, exited))
	if m == nil {
		cancel()
		t.Fatalf("no listening line:\n%s", stdout.String())
	}
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-exited:
			if code != 0 {
				t.Errorf("exit code %d, want 0; stderr:\n%s", code, stderr.String())
			}
		case <-time.After(waitBound):
			t.Error("run did not return after its context was cancelled")
		}
	})
	return m[1]
}

// Invariant: -framework fiber serves the same routes with the same
// behaviour as chi, on fiber's own server; where a test ends requests by
// abandoning them, the inbound timeout ends them instead (fasthttp does not
// notice a client that leaves while its handler runs).
func TestFrameworkFiber(t *testing.T) { runAsFramework(t, "fiber") }

// -framework fiber serves the same routes: health and limits outside the
// middleware, a 504 on time for work that ignores its deadline while the
// permit stays taken until it ends, and a cooperative handler stopped by
// its deadline.
func TestFiberFramework(t *testing.T) {
	base := startRun(t, "-framework", "fiber", "-permit-limit", "1", "-queue-limit", "0", "-timeout", "300ms")
	s := &testServer{url: base, client: newClient(t)}
	ctx := t.Context()

	if r := s.get(ctx, "/healthz"); r.status != http.StatusOK {
		t.Fatalf("/healthz: %+v", r)
	}
	start := time.Now()
	r := s.get(ctx, "/work?ms=1500")
	wantRejection(t, r, http.StatusGatewayTimeout, "TIMEOUT", "")
	if el := time.Since(start); el >= 1500*time.Millisecond {
		t.Errorf("504 after %v: not at the 300ms deadline but when the handler returned", el)
	}
	// The handler still runs and holds the only permit.
	if got := getLimits(t, s.client, base)["inflight"]; got != 1 {
		t.Errorf("inflight after the 504: %d, want 1", got)
	}
	wantRejection(t, s.get(ctx, "/cooperative?ms=10"), http.StatusServiceUnavailable, "BULKHEAD_FULL", "full")
	waitFor(t, "the late handler to return its permit", func() bool { return getLimits(t, s.client, base)["inflight"] == 0 })

	if r := s.get(ctx, "/cooperative?ms=10"); r.status != http.StatusOK {
		t.Errorf("/cooperative?ms=10: %+v", r)
	}
	wantRejection(t, s.get(ctx, "/cooperative?ms=5000"), http.StatusGatewayTimeout, "TIMEOUT", "")
	waitFor(t, "the cooperative handler to stop", func() bool { return getLimits(t, s.client, base)["inflight"] == 0 })

	// The routes are chi's: GET only, 405 for another method on them,
	// 404 elsewhere.
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/nowhere", http.StatusNotFound},
		{http.MethodHead, "/work", http.StatusMethodNotAllowed},
		{http.MethodPost, "/cooperative", http.StatusMethodNotAllowed},
		{http.MethodHead, "/healthz", http.StatusMethodNotAllowed},
	} {
		req, _ := http.NewRequestWithContext(ctx, c.method, base+c.path, nil)
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
}
