package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestService: the reference setup answers the health route and an order,
// rejects a bad query, and shuts down cleanly.
func TestService(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() { done <- run(ctx, nil, pw, io.Discard); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	base := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	tr := &http.Transport{}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/healthz", 200, "ok"},
		{"/orders/7?ms=1", 200, "{\"order\":\"7\"}\n"},
		{"/orders/7?ms=x", 400, "{\"error\":\"ms must be an integer from 0 to 60000\"}\n"},
	} {
		req, _ := http.NewRequest(http.MethodGet, base+tc.path, nil)
		req.Header.Set("X-Priority", "0")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || string(b) != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.path, resp.StatusCode, b, tc.status, tc.body)
		}
	}
	tr.CloseIdleConnections()
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
