package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A short retry-storm run prints the storm table and writes JSON whose
// every result carries the storm figures under their documented names,
// with mode names that say the client behaviour.
func TestRetryStormShortRun(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	out := runLab(t, "-scenario", "retry-storm", "-duration", "2s", "-rate", "200", "-modes", "fixed-naive,fixed-retrylast-budget-throttle",
		"-quiet", "-svg", filepath.Join(t.TempDir(), "c.svg"), "-json", jsonPath)
	for _, want := range []string{"retry storm:", "amplification overload", "recovery s", "fixed-retrylast-budget-throttle"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want 2", len(rep.Results))
	}
	for i, client := range []string{"naive", "budget-throttle"} {
		r := rep.Results[i]
		if name, _ := r["contender"].(string); !strings.HasSuffix(name, client) || r["client"] != client {
			t.Errorf("result %d: contender %v, client %v; want %s", i, r["contender"], r["client"], client)
		}
		for _, k := range []string{"amplification", "logicalShare", "firstAttemptShare", "retryShare", "recoverySeconds"} {
			if _, ok := r[k].(float64); !ok {
				t.Errorf("result %d lacks %s: %v", i, k, r[k])
			}
		}
		// 200 req/s is well under capacity: nearly every logical request
		// succeeds with its first attempt (a loaded machine may time one
		// out now and then).
		if share, amp := r["logicalShare"].(float64), r["amplification"].(float64); share < 0.98 || amp > 1.05 || amp < 1 {
			t.Errorf("result %d under capacity: logical share %v, amplification %v", i, r["logicalShare"], r["amplification"])
		}
	}
	if _, err := parse([]string{"-scenario", "retry-storm", "-modes", "fixed"}, os.Stderr); err == nil {
		t.Error("a storm mode without a client behaviour was accepted")
	}
}
