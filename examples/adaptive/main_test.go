package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The server starts goroutines (listener, handlers); none may survive a
// test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitBound is how long a test waits for a state; far above what it takes
// on a loaded machine, so it only matters when something is wrong.
const waitBound = 10 * time.Second

// syncBuffer is an io.Writer safe to read while run writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The program serves /healthz, /work and /debug/limits (JSON with limit,
// inflight, queued), prints its address first, and shuts down cleanly
// with exit code 0 when its context ends.
func TestRunServesAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, []string{"-base", "5ms", "-knee", "10"}, &stdout, &stderr) }()

	var url string
	deadline := time.Now().Add(waitBound)
	for url == "" {
		if line, _, ok := strings.Cut(stdout.String(), "\n"); ok {
			var found bool
			url, found = strings.CutPrefix(line, "listening on ")
			if !found || !strings.HasPrefix(url, "http://127.0.0.1:") {
				t.Fatalf("first line %q, want \"listening on http://127.0.0.1:PORT\"", line)
			}
			break
		}
		select {
		case code := <-exited:
			t.Fatalf("run exited with %d before listening: %s", code, stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no line on stdout")
		}
	}
	client := &http.Client{Timeout: waitBound, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func(path string, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url+path, nil)
		if len(header) == 2 {
			req.Header.Set(header[0], header[1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := get("/work", "X-Priority", "1"); code != 200 || body != "done\n" {
		t.Fatalf("/work: %d %q", code, body)
	}
	code, body := get("/debug/limits")
	var limits map[string]int
	if err := json.Unmarshal([]byte(body), &limits); code != 200 || err != nil {
		t.Fatalf("/debug/limits: %d %q (%v)", code, body, err)
	}
	for _, k := range []string{"limit", "inflight", "queued"} {
		if _, ok := limits[k]; !ok {
			t.Fatalf("/debug/limits %q lacks %q", body, k)
		}
	}
	if len(limits) != 3 || limits["limit"] < 4 || limits["inflight"] != 0 || limits["queued"] != 0 {
		t.Fatalf("/debug/limits = %v, want limit ≥ MinLimit 4 and nothing in flight", limits)
	}

	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit code %d after shutdown, stderr %q", code, stderr.String())
		}
	case <-time.After(waitBound):
		t.Fatal("run did not return after its context ended")
	}
	if !strings.Contains(stdout.String(), "shutting down") {
		t.Fatalf("stdout %q", stdout.String())
	}
}

// Invalid flags never start a server: exit code 2.
func TestRunRejectsInvalidFlags(t *testing.T) {
	for _, args := range [][]string{{"-knee", "0"}, {"-base", "-1ms"}, {"-nope"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 || out.Len() != 0 {
			t.Errorf("run(%q) = %d, stdout %q; want 2 and nothing printed", args, code, out.String())
		}
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-addr", "256.0.0.1:0"}, &out, io.Discard); code != 1 {
		t.Errorf("unusable -addr: exit %d, want 1", code)
	}
}
