package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMShutdownOrder protects the shutdown order a load balancer
// needs, on the real binary with a real SIGTERM: /readyz fails first
// while requests are still served (for -ready-delay), then the
// middleware drains (a new request gets 503 shutting-down while a running
// one finishes), then the process exits 0.
// On chi (net/http's server) and fiber (its own).
func TestSIGTERMShutdownOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "server")
	build := exec.Command("go", "build", "-o", bin, ".") // go test puts its own go first on PATH
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, fw := range []string{"chi", "fiber"} {
		t.Run(fw, func(t *testing.T) { testShutdownOrder(t, bin, fw) })
	}
}

func testShutdownOrder(t *testing.T, bin, framework string) {
	cmd := exec.Command(bin, "-framework", framework, "-ready-delay", "1s", "-timeout", "10s")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitLine := func(prefix string) string {
		t.Helper()
		timeout := time.After(waitBound)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("stdout ended before a line starting %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-timeout:
				t.Fatalf("no line starting %q within %v", prefix, waitBound)
			}
		}
	}
	base := strings.TrimPrefix(waitLine("listening on "), "listening on ")
	client := &http.Client{Timeout: waitBound}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before SIGTERM: %d", code)
	}
	// A request running across the whole shutdown: admitted now, it
	// finishes during the drain.
	running := make(chan int, 1)
	go func() {
		resp, err := client.Get(base + "/work?ms=4000")
		if err != nil {
			running <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		running <- resp.StatusCode
	}()
	waitFor(t, "the long request to be running", func() bool { return getLimits(t, client, base)["inflight"] == 1 })

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLine("shutting down: /readyz fails")
	// 1. Readiness fails while requests are still admitted.
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz after SIGTERM: %d %q, want 503", code, body)
	}
	if code, body := get("/work?ms=1"); code != http.StatusOK {
		t.Fatalf("/work during -ready-delay: %d %q, want it served", code, body)
	}
	// 2. Drain: new requests are refused at once while the long one runs.
	// The line comes just before Drain, so a request sent as it is read
	// may still be admitted; the next ones are not.
	waitLine("draining")
	deadline := time.Now().Add(waitBound)
	for {
		code, body := get("/work?ms=1")
		if code == http.StatusServiceUnavailable {
			if !strings.Contains(body, `"reason":"shutting-down"`) {
				t.Fatalf("/work while draining: %d %q, want 503 shutting-down", code, body)
			}
			break
		}
		if code != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("/work after the drain began: %d %q, want 503 shutting-down", code, body)
		}
	}
	select {
	case code := <-running:
		t.Fatalf("the long request ended (%d) before the drain refused a new one", code)
	default:
	}
	// 3. The running request finishes; the process exits 0.
	if code := <-running; code != http.StatusOK {
		t.Fatalf("the request running across the shutdown: %d, want 200", code)
	}
	select {
	case err := <-exited:
		exited <- err // for the deferred wait
		if err != nil {
			t.Fatalf("exit: %v, want status 0", err)
		}
	case <-time.After(waitBound):
		t.Fatal("the process did not exit after the drain")
	}
}
