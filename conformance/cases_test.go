package conformance

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// Every case is well formed: a unique name usable as a subtest and
// KnownFailing key, an explanation, and a pinned variant (with its
// description) exactly when it needs a capability the suite knows.
func TestCasesWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Cases() {
		if c.Name == "" || strings.ContainsAny(c.Name, " /") || seen[c.Name] {
			t.Errorf("case name %q is empty, has a space or slash, or repeats", c.Name)
		}
		seen[c.Name] = true
		if len(c.Explanation) < 40 {
			t.Errorf("case %q: explanation too short to help: %q", c.Name, c.Explanation)
		}
		if c.run == nil {
			t.Errorf("case %q has no body", c.Name)
		}
		if c.Requires != "" {
			if !knownCapability(c.Requires) {
				t.Errorf("case %q requires unknown capability %q", c.Name, c.Requires)
			}
			if c.pinned == nil || c.Pinned == "" {
				t.Errorf("case %q requires %q but has no pinned variant", c.Name, c.Requires)
			}
		} else if c.pinned != nil || c.Pinned != "" {
			t.Errorf("case %q has a pinned variant but requires nothing", c.Name)
		}
	}
	for _, ci := range Capabilities() {
		used := false
		for _, c := range Cases() {
			used = used || c.Requires == ci.Capability
		}
		if !used {
			t.Errorf("capability %q is required by no case", ci.Capability)
		}
	}
}

// Cases returns a copy: changing it cannot change what Run runs.
func TestCasesIsACopy(t *testing.T) {
	cs := Cases()
	cs[0].Name = "changed"
	if Cases()[0].Name == "changed" {
		t.Error("Cases returned the suite's own slice")
	}
}

// The package documentation lists every case, in the order Run runs them,
// so KnownFailing can be written from go doc.
func TestDocListsEveryCase(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, line := range strings.Split(string(doc), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "//\t")); strings.HasPrefix(line, "//\t") && len(f) > 1 {
			for _, c := range Cases() {
				if f[0] == c.Name {
					listed = append(listed, f[0])
				}
			}
		}
	}
	var want []string
	for _, c := range Cases() {
		want = append(want, c.Name)
	}
	if strings.Join(listed, " ") != strings.Join(want, " ") {
		t.Errorf("doc.go lists\n  %v\nwant every case in Run's order\n  %v", listed, want)
	}
}

// A failure names the line that found it: a helper's failure the line that
// called the helper, a cleanup's the cleanup's own line (not the runtime's
// panic.go, from which deferred cleanups run).
func TestFailuresNameTheSuiteLine(t *testing.T) {
	ct := &caseT{t: t}
	var caseLine, cleanupLine int
	ct.execute(func(ct *caseT) {
		ct.Cleanup(func() {
			_, _, cleanupLine, _ = runtime.Caller(0)
			ct.Errorf("from a cleanup")
		})
		_, _, caseLine, _ = runtime.Caller(0)
		failingHelper(ct)
	})
	got := ct.Failures()
	want := []string{
		fmt.Sprintf("cases_test.go:%d: from a helper", caseLine+1),
		fmt.Sprintf("cases_test.go:%d: from a cleanup", cleanupLine+1),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("failures\n  %q\nwant\n  %q", got, want)
	}
}

func failingHelper(t *caseT) {
	t.Helper()
	t.Fatalf("from a helper")
}
