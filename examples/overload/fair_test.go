package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fair scenario reports every tenant of every mode as a class entry
// (class, sent, inTime, share) in the JSON, and a per-tenant table.
func TestFairScenarioReportsTenants(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "fair.json")
	out := runLab(t, "-scenario", "fair", "-duration", "2s", "-rate", "200", "-modes", "fixed,fixed-fair", "-quiet",
		"-svg", filepath.Join(t.TempDir(), "c.svg"), "-json", jsonPath)
	for _, want := range []string{"scenario fair", "answered in time per tenant", "noisy [120]", "quiet-9 [9]", "worst quiet", "fixed-fair"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Results []struct {
			Contender string
			Classes   []struct {
				Class  string  `json:"class"`
				Sent   int     `json:"sent"`
				InTime int     `json:"inTime"`
				Share  float64 `json:"share"`
			} `json:"classes"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want 2", len(rep.Results))
	}
	for _, r := range rep.Results {
		if len(r.Classes) != 10 || r.Classes[0].Class != "noisy" || r.Classes[9].Class != "quiet-9" {
			t.Fatalf("%s: classes %+v, want noisy and quiet-1..9", r.Contender, r.Classes)
		}
		for _, c := range r.Classes {
			if c.Sent == 0 || c.InTime > c.Sent {
				t.Errorf("%s: class %+v", r.Contender, c)
			}
		}
	}
}
