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

// The fair-closed scenario runs its tenants as closed-loop workers and
// reports them like the fair scenario (-workers 24 splits by the tenants'
// rates, at least one each: 21 noisy and nine quiet): the header names the
// closed loop,
// the tenant table the workers, and every tenant sends (each request a
// first attempt, re-sends after a 503 included).
func TestFairClosedScenarioReportsTenants(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "fair-closed.json")
	out := runLab(t, "-scenario", "fair-closed", "-duration", "2s", "-workers", "24", "-modes", "fixed-codel-fair", "-quiet",
		"-svg", filepath.Join(t.TempDir(), "c.svg"), "-json", jsonPath)
	for _, want := range []string{"scenario fair-closed: closed loop: 30 workers, re-send now", "closed-loop workers in brackets", "noisy [21]", "quiet-9 [1]", "worst quiet"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Config struct {
			Workers int    `json:"workers"`
			Resend  string `json:"resend"`
		} `json:"config"`
		Results []struct {
			Retries int `json:"retries"`
			Classes []struct {
				Class string `json:"class"`
				Sent  int    `json:"sent"`
			} `json:"classes"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Config.Workers != 24 || rep.Config.Resend != "now" || len(rep.Results) != 1 {
		t.Fatalf("config %+v, %d results", rep.Config, len(rep.Results))
	}
	r := rep.Results[0]
	if len(r.Classes) != 10 || r.Retries != 0 {
		t.Fatalf("classes %+v, retries %d: want 10 tenants and no retries (a re-send is a request of its own)", r.Classes, r.Retries)
	}
	for _, c := range r.Classes {
		if c.Sent == 0 {
			t.Errorf("tenant %s sent nothing", c.Class)
		}
	}
}
