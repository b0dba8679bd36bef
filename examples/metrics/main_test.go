package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunServesMetrics protects the program end to end: it listens, prints
// its address first, serves /work through the middleware and the
// resilience series on /metrics, and exits 0 when its context ends.
func TestRunServesMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-work", "1ms"}, pw, io.Discard)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatal("no output")
	}
	url, ok := strings.CutPrefix(sc.Text(), "listening on ")
	if !ok {
		t.Fatalf("first line %q", sc.Text())
	}
	go io.Copy(io.Discard, pr)

	resp, err := http.Get(url + "/work")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Ratelimit-Remaining") != "599" {
		t.Fatalf("/work: %d, remaining %q", resp.StatusCode, resp.Header.Get("Ratelimit-Remaining"))
	}
	resp, err = http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`resilience_execution_duration_seconds_count{resilience_outcome="ok",resilience_pipeline_name="api"} 1`,
		`resilience_limiter_limit{resilience_limiter_name="api"} 20`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
