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

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp refreshes its cached Date header on a goroutine it
		// starts with the first server and never stops.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// Its worker pool's cleaner looks for the stop signal only between
		// sleeps of MaxIdleWorkerDuration (10 s), so it outlives the
		// server's shutdown by up to that long.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	)
}

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

// The reference setup answers a handler that ignores its deadline with a
// 504 at the deadline while the handler runs on and keeps its permit, and
// shuts down cleanly.
func TestReferenceSetup(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, nil, &stdout, &stderr) }()
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; {
		if line, _, ok := strings.Cut(stdout.String(), "\n"); ok {
			base = strings.TrimPrefix(line, "listening on ")
		} else if time.Now().After(deadline) {
			t.Fatal("no listening line")
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	limits := func() map[string]int {
		_, b := get("/debug/limits")
		var m map[string]int
		if err := json.Unmarshal([]byte(b), &m); err != nil {
			t.Fatalf("/debug/limits: %q: %v", b, err)
		}
		return m
	}

	if st, body := get("/orders/7?ms=1"); st != 200 || body != "order 7\n" {
		t.Errorf("/orders/7: %d %q", st, body)
	}
	start := time.Now()
	st, body := get("/report?ms=3000")
	if el := time.Since(start); st != 504 || !strings.Contains(body, `"code":"TIMEOUT"`) || el >= 3*time.Second {
		t.Errorf("/report?ms=3000: %d %q after %v; want the 504 at the 1 s deadline", st, body, el)
	}
	if l := limits(); l["inflight"] != 1 || l["late"] != 1 {
		t.Errorf("limits right after the 504: %v; want the late handler in flight", l)
	}
	if st, body := get("/orders/8?ms=5000"); st != 504 || !strings.Contains(body, `"code":"TIMEOUT"`) {
		t.Errorf("/orders/8?ms=5000: %d %q", st, body)
	}
	for deadline := time.Now().Add(10 * time.Second); limits()["inflight"] != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the late handler never returned its permit")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, _ := get("/healthz"); st != 200 {
		t.Errorf("/healthz: %d", st)
	}
	tr.CloseIdleConnections()
	cancel()
	if code := <-exited; code != 0 {
		t.Errorf("exit code %d; stderr:\n%s", code, stderr.String())
	}
}
