package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The server starts goroutines (listeners, handlers that outlive their
// 504); none may survive a test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// -framework fiber: fasthttp refreshes its cached Date header on a
		// goroutine it starts with the first server and never stops.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// and its worker pool's cleaner looks for the stop signal only
		// between sleeps of MaxIdleWorkerDuration (10 s), so it outlives
		// the server's shutdown by up to that long.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	)
}

// waitBound is how long a test waits for a state it polls for. It is far
// above what the state takes even on a loaded machine under -race, so it
// only matters when something is really wrong.
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

// firstLine waits until buf holds a complete first line and returns it.
func firstLine(t *testing.T, buf *syncBuffer, exited <-chan int) string {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for time.Now().Before(deadline) {
		if line, _, ok := strings.Cut(buf.String(), "\n"); ok {
			return line
		}
		select {
		case code := <-exited:
			t.Fatalf("run exited with %d before printing a line", code)
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatal("no line on stdout")
	return ""
}

// Invariant: an invalid flag value never starts a server; the process exits
// non-zero with a message that names the flag.
func TestRunRejectsInvalidFlags(t *testing.T) {
	cases := []struct {
		args []string
		flag string
	}{
		{[]string{"-framework", "nope"}, "-framework"},
		{[]string{"-framework", ""}, "-framework"},
		{[]string{"-addr", ""}, "-addr"},
		{[]string{"-addr", "not-an-address"}, "-addr"},
		{[]string{"-timeout", "0"}, "-timeout"},
		{[]string{"-timeout", "-1s"}, "-timeout"},
		{[]string{"-timeout", "soon"}, "-timeout"},
		{[]string{"-timeout", "1000000h"}, "-timeout"}, // rejected by the middleware's own bound
		{[]string{"-permit-limit", "0"}, "-permit-limit"},
		{[]string{"-permit-limit", "many"}, "-permit-limit"},
		{[]string{"-queue-limit", "-1"}, "-queue-limit"},
		{[]string{"-queue-timeout", "-1ms"}, "-queue-timeout"},
		{[]string{"-queue-timeout", "1000000h"}, "-queue-timeout"},
		{[]string{"-overflow", "drop-newest"}, "-overflow"},
		{[]string{"-rate-limit", "-1"}, "-rate-limit"},
		{[]string{"-rate-limit", "1.5"}, "-rate-limit"},
		{[]string{"-rate-limit", "5", "-rate-window", "0"}, "-rate-window"},
		{[]string{"-rate-limit", "5", "-rate-window", "1000000h"}, "-rate-window"},
		{[]string{"-rate-key", "cookie:session"}, "-rate-key"},
		{[]string{"-rate-key", "header:"}, "-rate-key"},
		{[]string{"-rate-key", "header:X Api"}, "-rate-key"},
		{[]string{"-no-such-flag"}, "-no-such-flag"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var stdout, stderr syncBuffer
			code := run(t.Context(), c.args, &stdout, &stderr)
			if code == 0 {
				t.Fatalf("exit code 0, want non-zero")
			}
			if !strings.Contains(stderr.String(), c.flag) {
				t.Errorf("stderr does not name %s:\n%s", c.flag, stderr.String())
			}
			if strings.Contains(stdout.String(), "listening on") {
				t.Errorf("printed a listening line despite the invalid flag")
			}
		})
	}
}

// A positional argument is a mistake (a flag without its dash, say), not
// something to ignore.
func TestRunRejectsPositionalArguments(t *testing.T) {
	var stdout, stderr syncBuffer
	if code := run(t.Context(), []string{"permit-limit", "5"}, &stdout, &stderr); code == 0 {
		t.Fatal("exit code 0, want non-zero")
	}
	if !strings.Contains(stderr.String(), `"permit-limit"`) {
		t.Errorf("stderr does not quote the argument: %s", stderr.String())
	}
}

func TestRunHelpExitsZero(t *testing.T) {
	var stdout, stderr syncBuffer
	if code := run(t.Context(), []string{"-h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	if !strings.Contains(stderr.String(), "-permit-limit") {
		t.Errorf("usage does not list the flags:\n%s", stderr.String())
	}
}

var listeningLine = regexp.MustCompile(`^listening on (http://127\.0\.0\.1:[1-9][0-9]*)$`)

// Contract with outside tools: the first stdout line is exactly
// "listening on http://HOST:PORT" with the real port, the server answers
// there, and cancelling the context (what SIGINT/SIGTERM do in main)
// shuts it down with exit code 0, leaving no goroutine behind.
func TestRunFirstLineThenCleanShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, nil, &stdout, &stderr) }()

	line := firstLine(t, &stdout, exited)
	m := listeningLine.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("first line %q does not match %v", line, listeningLine)
	}
	client := newClient(t)
	resp, err := client.Get(m[1] + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}

	cancel()
	expectCleanExit(t, exited, &stderr, " after shutdown")
	if !strings.Contains(stdout.String(), "shutting down") {
		t.Errorf("stdout does not say it is shutting down:\n%s", stdout.String())
	}
}

// Shutdown is graceful: a request already running when the signal comes is
// answered normally, not cut off.
func TestRunShutdownFinishesRunningRequests(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, []string{"-permit-limit", "1"}, &stdout, &stderr) }()
	base := listeningLine.FindStringSubmatch(firstLine(t, &stdout, exited))[1]
	client := newClient(t)

	status := make(chan int, 1)
	go func() {
		resp, err := client.Get(base + "/work?ms=300")
		if err != nil {
			status <- -1
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	waitFor(t, "the request to run", func() bool { return getLimits(t, client, base)["inflight"] == 1 })

	cancel()
	if got := <-status; got != http.StatusOK {
		t.Errorf("running request got %d during shutdown, want 200", got)
	}
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit code %d, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(waitBound):
		t.Fatal("run did not return")
	}
}

// Shutdown answers the queue: with requests queued (no queue timeout), the
// signal gets each of them a 503 shutting-down at once, while the request
// running when it came is still running, and that request then finishes
// with its 200; no request is left without a response.
func TestRunShutdownAnswersTheQueue(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"-permit-limit", "1", "-queue-limit", "5", "-queue-timeout", "0"}, &stdout, &stderr)
	}()
	base := listeningLine.FindStringSubmatch(firstLine(t, &stdout, exited))[1]
	client := newClient(t)

	type answer struct {
		status int
		body   string
		err    error
	}
	getAsync := func(path string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			resp, err := client.Get(base + path)
			if err != nil {
				ch <- answer{err: err}
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			ch <- answer{resp.StatusCode, string(b), err}
		}()
		return ch
	}
	running := getAsync("/work?ms=2000")
	waitFor(t, "the request to run", func() bool { return getLimits(t, client, base)["inflight"] == 1 })
	var queued []<-chan answer
	for i := 0; i < 3; i++ {
		queued = append(queued, getAsync("/work?ms=10"))
	}
	waitFor(t, "three requests queued", func() bool { return getLimits(t, client, base)["queued"] == 3 })

	cancel()
	for i, ch := range queued {
		select {
		case a := <-ch:
			if a.err != nil || a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, `"reason":"shutting-down"`) {
				t.Errorf("queued request %d at shutdown: %d %q %v, want 503 shutting-down", i, a.status, a.body, a.err)
			}
			select {
			case r := <-running:
				t.Fatalf("the running request ended (%d %v) before queued request %d was answered; the queue must be answered at once", r.status, r.err, i)
			default:
			}
		case <-time.After(waitBound):
			t.Fatalf("queued request %d: no response %v after the signal", i, waitBound)
		}
	}
	if a := <-running; a.err != nil || a.status != http.StatusOK {
		t.Errorf("running request: %d %v, want its 200", a.status, a.err)
	}
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit code %d, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(waitBound):
		t.Fatal("run did not return")
	}
}
