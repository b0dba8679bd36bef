package conformance

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// Case describes one conformance case, for documentation: its name, the
// behaviour it pins and why that matters. Cases lists them; Run runs
// them.
type Case struct {
	// Name is stable; it names the subtest and keys Harness.KnownFailing.
	Name string
	// Explanation says what the case checks and why it matters. Run prints
	// it when the case fails.
	Explanation string
	// Requires is the capability the full case needs, or "" for none.
	Requires Capability
	// Pinned says what the case asserts instead when the adapter lacks
	// Requires. Empty when Requires is "".
	Pinned string

	run    func(t *caseT, e *env)
	pinned func(t *caseT, e *env)
}

// Cases returns the suite's cases in the order Run runs them. The slice is
// a copy; changing it changes nothing.
func Cases() []Case {
	return append([]Case(nil), allCases...)
}

// Run runs every case against the adapter described by h, each as a
// subtest t.Run(case.Name, …). A failing case prints its explanation with
// its failures. A case that needs a capability in h.Missing runs its pinned
// variant. A case in h.KnownFailing passes while it fails (it is logged
// and marked skipped) and fails once it passes.
//
// Cases run one after another (the timing cases must not compete for the
// CPU with each other, and the stress case counts goroutines), so do not
// run other tests in parallel with Run in the same process. The whole
// suite takes a few seconds, about ten under the race detector.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Start == nil {
		t.Fatal("conformance: Harness.Start is nil")
	}
	if !checkHarness(t, h) {
		return
	}
	for _, c := range allCases {
		t.Run(c.Name, func(t *testing.T) { runCase(t, h, c) })
	}
}

// checkHarness rejects names that match nothing, so a typo in Missing or
// KnownFailing cannot silently change what runs.
func checkHarness(t *testing.T, h Harness) bool {
	t.Helper()
	ok := true
	for c := range h.Missing {
		if !knownCapability(c) {
			t.Errorf("conformance: Harness.Missing names unknown capability %q", c)
			ok = false
		}
	}
	names := make(map[string]bool, len(allCases))
	for _, c := range allCases {
		names[c.Name] = true
	}
	for n := range h.KnownFailing {
		if !names[n] {
			t.Errorf("conformance: Harness.KnownFailing names unknown case %q", n)
			ok = false
		}
	}
	return ok
}

func runCase(t *testing.T, h Harness, c Case) {
	body, variant := c.run, "full"
	missingReason := ""
	if c.Requires != "" {
		if reason, missing := h.Missing[c.Requires]; missing {
			body, variant, missingReason = c.pinned, "pinned", reason
		}
	}
	if variant == "pinned" {
		t.Logf("adapter %s lacks %q (%s); running the pinned variant: %s", h.Name, c.Requires, missingReason, c.Pinned)
	}
	ct := &caseT{t: t, decode: h.DecodeRejection}
	ct.execute(func(ct *caseT) { body(ct, &env{t: ct, h: h}) })
	failures := ct.Failures()

	reason, known := h.KnownFailing[c.Name]
	switch {
	case known && len(failures) > 0:
		t.Skipf("known failing (%s); still fails as listed:\n%s", reason, indent(failures))
	case known:
		t.Errorf("case %q is listed in Harness.KnownFailing (%s) but now passes: remove it from the list", c.Name, reason)
	case len(failures) > 0:
		var b strings.Builder
		fmt.Fprintf(&b, "adapter %s fails case %q (%s variant)\n", h.Name, c.Name, variant)
		fmt.Fprintf(&b, "  what it checks: %s\n", c.Explanation)
		if variant == "pinned" {
			fmt.Fprintf(&b, "  pinned variant (%s missing: %s): %s\n", c.Requires, missingReason, c.Pinned)
		}
		b.WriteString("  failures:\n")
		b.WriteString(indent(failures))
		t.Error(b.String())
	}
}

func indent(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("    - ")
		b.WriteString(strings.ReplaceAll(l, "\n", "\n      "))
		b.WriteByte('\n')
	}
	return b.String()
}

// caseT is what a case runs with. It records failures instead of reporting
// them at once, so that Run can invert the outcome of a known-failing case.
// Errorf and Logf are safe to call from any goroutine while the case runs;
// Fatalf stops the case and must be called from the case's own goroutine,
// as with testing.T. Cleanup functions run last-in first-out when the case
// ends, whatever the outcome.
type caseT struct {
	t      *testing.T
	decode RejectionDecoder // the harness's; nil for inbound's JSON

	mu       sync.Mutex
	failures []string
	cleanups []func()
	done     bool
}

// Errorf records a failure and lets the case go on.
func (t *caseT) Errorf(format string, args ...any) {
	t.record(fmt.Sprintf(format, args...))
}

// Fatalf records a failure and ends the case.
func (t *caseT) Fatalf(format string, args ...any) {
	t.record(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// Logf logs to the subtest, shown with -v or on failure.
func (t *caseT) Logf(format string, args ...any) {
	t.mu.Lock()
	done := t.done
	t.mu.Unlock()
	if !done {
		t.t.Logf(format, args...)
	}
}

// Cleanup registers f to run when the case ends.
func (t *caseT) Cleanup(f func()) {
	t.mu.Lock()
	t.cleanups = append(t.cleanups, f)
	t.mu.Unlock()
}

// Context is cancelled when the case ends.
func (t *caseT) Context() context.Context { return t.t.Context() }

// Failed reports whether a failure was recorded.
func (t *caseT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.failures) > 0
}

// Failures returns the failures recorded so far.
func (t *caseT) Failures() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.failures...)
}

// Helper marks the calling function as a helper, as testing.T.Helper
// does: a failure recorded inside it is reported at the line that called
// it. Every helper of the suite calls it, so each failure names a line of
// a case (or of the cleanup that found it).
func (t *caseT) Helper() {
	var pc [1]uintptr
	if runtime.Callers(2, pc[:]) == 0 {
		return
	}
	f, _ := runtime.CallersFrames(pc[:]).Next()
	helpers.Store(f.Function, true)
}

// helpers holds the names of the functions marked by T.Helper. The
// suite's functions are helpers or not whatever the case, so one set
// serves every T.
var helpers sync.Map

func (t *caseT) record(msg string) {
	// Prefix the file:line of the first caller that is neither a helper
	// nor the runtime (a cleanup runs from the runtime's deferred calls).
	var pcs [32]uintptr
	n := runtime.Callers(3, pcs[:]) // skip Callers, record, Errorf or Fatalf
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		_, helper := helpers.Load(f.Function)
		if !helper && !strings.HasPrefix(f.Function, "runtime.") && f.File != "" {
			msg = fmt.Sprintf("%s:%d: %s", filepath.Base(f.File), f.Line, msg)
			break
		}
		if !more {
			break
		}
	}
	t.mu.Lock()
	t.failures = append(t.failures, msg)
	t.mu.Unlock()
}

// execute runs body on its own goroutine, so that Fatalf can end it with
// runtime.Goexit without touching the testing.T, then runs the cleanups.
// A panic in the body is recorded as a failure with its stack.
func (t *caseT) execute(body func(*caseT)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer t.runCleanups()
		defer func() {
			if r := recover(); r != nil {
				t.record(fmt.Sprintf("case panicked: %v\n%s", r, debug.Stack()))
			}
		}()
		body(t)
	}()
	<-done
	t.mu.Lock()
	t.done = true
	t.mu.Unlock()
}

func (t *caseT) runCleanups() {
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			t.mu.Unlock()
			return
		}
		f := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.record(fmt.Sprintf("cleanup panicked: %v\n%s", r, debug.Stack()))
				}
			}()
			f()
		}()
	}
}
