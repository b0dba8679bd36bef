package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// figures runs the program and returns the calls and the attempts that
// reached the service.
func figures(t *testing.T, args ...string) (out string, calls, attempts int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out = stdout.String()
	m := regexp.MustCompile(`(\d+) calls:[\s\S]*reached the service: (\d+) first attempts, (\d+) marked retries`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("unexpected output:\n%s", out)
	}
	calls, _ = strconv.Atoi(m[1])
	f, _ := strconv.Atoi(m[2])
	r, _ := strconv.Atoi(m[3])
	return out, calls, f + r
}

// With the budget the service sees at most 1.1 attempts per call (plus
// the floor), where naive retries send more: the service has 4 permits
// for 16 callers, so most first attempts are shed and retried.
func TestBudgetBoundsWhatReachesTheService(t *testing.T) {
	out, calls, attempts := figures(t, "-clients", "16", "-calls", "10")
	if float64(attempts) > 1.1*float64(calls)+10 {
		t.Errorf("with the budget %d attempts reached the service for %d calls:\n%s", attempts, calls, out)
	}
	for _, want := range []string{"budget: ", "throttle: "} {
		if !bytes.Contains([]byte(out), []byte(want)) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, calls, attempts = figures(t, "-naive", "-clients", "16", "-calls", "10")
	if float64(attempts) <= 1.1*float64(calls)+10 {
		t.Errorf("naive retries sent only %d attempts for %d calls; the service does not shed enough to show the difference:\n%s", attempts, calls, out)
	}
}

func TestBadFlags(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-clients", "0"}, &out, &out); code != 2 {
		t.Fatalf("exit %d", code)
	}
}
