package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ylcnfrht/resilience/extensions/otel/promrules"
)

// TestFlagsSetTheConfig protects the command as promrules' front: its
// flags give exactly the file Generate gives for the same Config, to
// standard output or to -o, and an invalid value exits 2 naming it.
func TestFlagsSetTheConfig(t *testing.T) {
	c := promrules.DefaultConfig()
	c.Selector = `job="api"`
	c.ServiceLabels = []string{"cluster", "job"}
	c.Window = 2 * time.Minute
	c.MinRequestRate = 1
	c.Labels = map[string]string{"team": "shop"}
	c.Shed = promrules.Alert{Threshold: 0.02, For: 5 * time.Minute, Severity: "critical"}
	c.Absent.Severity = "warning"
	c.ReloadFailed = promrules.Alert{For: time.Minute, Severity: "page"}
	c.ReloadWindow = time.Hour
	want, err := promrules.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-selector", `job="api"`, "-service-labels", "cluster, job", "-window", "2m", "-min-request-rate", "1",
		"-label", "team=shop", "-shed-threshold", "0.02", "-shed-for", "5m", "-shed-severity", "critical", "-absent-severity", "warning",
		"-reload-failed-for", "1m", "-reload-failed-severity", "page", "-reload-window", "1h"}
	var out, errs bytes.Buffer
	if code := run(args, &out, &errs); code != 0 || !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("exit %d, stderr %q; output equals Generate's: %v", code, errs.String(), bytes.Equal(out.Bytes(), want))
	}
	file := filepath.Join(t.TempDir(), "alerts.yml")
	if code := run(append(args, "-o", file), io.Discard, io.Discard); code != 0 {
		t.Fatalf("-o: exit %d", code)
	}
	if b, err := os.ReadFile(file); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("-o wrote %d bytes (%v), not Generate's", len(b), err)
	}
	errs.Reset()
	if code := run([]string{"-timeout-threshold", "2"}, io.Discard, &errs); code != 2 || !strings.Contains(errs.String(), "Timeout.Threshold") {
		t.Fatalf("an invalid threshold: exit %d, %q", code, errs.String())
	}
}
