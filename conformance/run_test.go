package conformance_test

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ylcnfrht/resilience/conformance"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// The tests below check Run's own rules by running the suite, with a
// deliberately wrong harness, in a child process (this test binary again,
// selected by selfTestEnv), and reading its verdict and output: a failing
// case must fail the child, so it cannot run in this process.

const selfTestEnv = "CONFORMANCE_SELF_TEST"

// selfTestHarnesses are the harnesses the child runs, by name.
var selfTestHarnesses = map[string]func() conformance.Harness{
	// Start always fails, so every case fails.
	"broken": brokenHarness,
	// A passing case listed as known failing.
	"stale-known-failing": func() conformance.Harness {
		h := netHTTPHarness()
		h.KnownFailing = map[string]string{"admit-below-limit": "listed on purpose by the self-test"}
		return h
	},
	// A failing case listed as known failing.
	"known-failing": func() conformance.Harness {
		h := brokenHarness()
		h.KnownFailing = map[string]string{"admit-below-limit": "listed on purpose by the self-test"}
		return h
	},
	// net/http reports disconnects, so the pinned variant of a
	// disconnect case (the timeout ends the request instead) fails
	// against it: proof the pinned variant is what ran.
	"missing-disconnect": func() conformance.Harness {
		h := netHTTPHarness()
		h.Missing = map[conformance.Capability]string{conformance.CapDisconnect: "declared missing by the self-test"}
		return h
	},
	// The middleware is built (Stats are real) but never put in front of
	// the handler: the first mistake an adapter author can make.
	"no-op": noopHarness,
	"unknown-names": func() conformance.Harness {
		h := netHTTPHarness()
		h.Missing = map[conformance.Capability]string{"teleportation": "no such capability"}
		h.KnownFailing = map[string]string{"no-such-case": "no such case"}
		return h
	},
}

func noopHarness() conformance.Harness {
	return conformance.Harness{Name: "no-op", Start: func(cfg conformance.Config) (*conformance.Server, error) {
		m, err := inbound.New(cfg.Options)
		if err != nil {
			return nil, err
		}
		mux := http.NewServeMux()
		mux.Handle("GET "+conformance.HealthPath, cfg.Health)
		mux.Handle("/", cfg.Handler) // the bug: m.Handler is never applied
		mux.Handle(conformance.RoutePattern, cfg.Handler)
		return conformance.NewHTTPServer(mux, m.Stats)
	}}
}

func brokenHarness() conformance.Harness {
	return conformance.Harness{Name: "broken", Start: func(conformance.Config) (*conformance.Server, error) {
		return nil, errors.New("deliberately broken harness")
	}}
}

// TestSelfHarness is the child's entry point; it does nothing unless
// selfTestEnv names a harness.
func TestSelfHarness(t *testing.T) {
	name := os.Getenv(selfTestEnv)
	if name == "" {
		t.Skip("run by the self-tests in a child process")
	}
	conformance.Run(t, selfTestHarnesses[name]())
}

// runChild runs the suite's case with the named harness in a child
// process and returns whether it passed, and its output.
func runChild(t *testing.T, harness, caseName string) (bool, string) {
	t.Helper()
	pattern := "^TestSelfHarness$"
	if caseName != "" {
		pattern += "/^" + caseName + "$"
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run="+pattern, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), selfTestEnv+"="+harness)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running the child: %v", err)
	}
	return err == nil, string(out)
}

func expectOutput(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("child output lacks %q:\n%s", w, out)
		}
	}
}

// A failing case fails the run and prints its explanation.
func TestRunFailurePrintsExplanation(t *testing.T) {
	passed, out := runChild(t, "broken", "queue-full-rejects-at-once")
	if passed {
		t.Fatalf("the broken harness passed:\n%s", out)
	}
	var explanation string
	for _, c := range conformance.Cases() {
		if c.Name == "queue-full-rejects-at-once" {
			explanation = c.Explanation
		}
	}
	expectOutput(t, out, "--- FAIL: TestSelfHarness/queue-full-rejects-at-once",
		"what it checks: "+explanation[:60], "deliberately broken harness")
}

// A known-failing case that passes fails the run, so the list cannot go
// stale.
func TestRunKnownFailingThatPassesFails(t *testing.T) {
	passed, out := runChild(t, "stale-known-failing", "admit-below-limit")
	if passed {
		t.Fatalf("a passing case listed as known failing did not fail the run:\n%s", out)
	}
	expectOutput(t, out, "now passes: remove it from the list")
}

// A known-failing case that still fails does not fail the run.
func TestRunKnownFailingThatFailsPasses(t *testing.T) {
	passed, out := runChild(t, "known-failing", "admit-below-limit")
	if !passed {
		t.Fatalf("a failing case listed as known failing failed the run:\n%s", out)
	}
	expectOutput(t, out, "--- SKIP: TestSelfHarness/admit-below-limit", "known failing (listed on purpose by the self-test)")
}

// A missing capability runs the pinned variant instead of skipping.
func TestRunMissingCapabilityRunsPinnedVariant(t *testing.T) {
	passed, out := runChild(t, "missing-disconnect", "disconnect-while-running")
	if passed {
		t.Fatalf("the pinned variant passed against a middleware that sees disconnects:\n%s", out)
	}
	expectOutput(t, out, "pinned variant", "declared missing by the self-test", "want it ended by the inbound timeout")
}

// Names in Missing and KnownFailing that match nothing fail the run.
func TestRunRejectsUnknownNames(t *testing.T) {
	passed, out := runChild(t, "unknown-names", "")
	if passed {
		t.Fatalf("unknown names were accepted:\n%s", out)
	}
	expectOutput(t, out, `unknown capability "teleportation"`, `unknown case "no-such-case"`)
}

// An adapter whose middleware is not in front of the handler fails every
// case, and fails it as soon as its outcome is decided: no wait of the
// suite runs to its bound (10 s for a state, 20 s for a request), so the
// whole suite reports in moments rather than minutes.
func TestBrokenAdapterFailsEveryCaseWithoutWaitingItsBounds(t *testing.T) {
	passed, out := runChild(t, "no-op", "")
	if passed {
		t.Fatalf("the no-op adapter passed:\n%s", out)
	}
	for _, c := range conformance.Cases() {
		expectOutput(t, out, "--- FAIL: TestSelfHarness/"+c.Name+" ")
	}
	expectOutput(t, out, "while the middleware's Stats counted nothing in flight")
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "- ") {
			continue // only the failures, not the explanations
		}
		for _, bound := range []string{"after 10s", "within 10s", "after 20s", "deadline exceeded"} {
			if strings.Contains(line, bound) {
				t.Errorf("a wait ran to its bound (%q) although the case had already failed: %s", bound, strings.TrimSpace(line))
			}
		}
	}
}
