package promrules

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestGenerateNamesTheBadField protects the config errors: each field
// Generate cannot use is reported by name, as a *ConfigError matching
// ErrConfig, and nothing is generated.
func TestGenerateNamesTheBadField(t *testing.T) {
	for _, c := range []struct {
		field string
		edit  func(*Config)
	}{
		{"Group", func(c *Config) { c.Group = "" }},
		{"Selector", func(c *Config) { c.Selector = `{job="api"}` }},
		{"Selector", func(c *Config) { c.Selector = `job=api` }},
		{"Selector", func(c *Config) { c.Selector = `job="{{ . }}"` }},
		{"ServiceLabels", func(c *Config) { c.ServiceLabels = []string{"job", "k8s-namespace"} }},
		{"Window", func(c *Config) { c.Window = 30 * time.Second }},
		{"MinRequestRate", func(c *Config) { c.MinRequestRate = -1 }},
		{"RunbookURL", func(c *Config) { c.RunbookURL = "https://example.com/runbook#top" }},
		{"Labels", func(c *Config) { c.Labels = map[string]string{"severity": "low"} }},
		{"Shed.Threshold", func(c *Config) { c.Shed.Threshold = 0 }},
		{"Timeout.Threshold", func(c *Config) { c.Timeout.Threshold = 1.5 }},
		{"StoreFailOpen.For", func(c *Config) { c.StoreFailOpen.For = -time.Minute }},
		{"Absent.Severity", func(c *Config) { c.Absent.Severity = "" }},
		{"ReloadWindow", func(c *Config) { c.ReloadWindow = 0 }},
		{"ReloadFailed.For", func(c *Config) { c.ReloadFailed.For = time.Millisecond }},
	} {
		cfg := DefaultConfig()
		c.edit(&cfg)
		b, err := Generate(cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, ErrConfig) || b != nil {
			t.Errorf("%s: Generate = %d bytes, %v; want a *ConfigError for %s", c.field, len(b), err, c.field)
		}
	}
	cfg := DefaultConfig()
	cfg.LateHandlers.Threshold = 7 // ignored by a gauge alert
	cfg.MinRequestRate = 0
	cfg.Selector = `job="api", namespace=~"shop-.*",`
	if _, err := Generate(cfg); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
}

// metricSelector is a selector of a resilience series in generated PromQL.
var metricSelector = regexp.MustCompile(`resilience_[a-z_]+(\{[^}]*\})?`)

// TestGenerateAppliesEveryParameter protects the parameters from being
// documented but ignored: the selector reaches every series selector, the
// window every rate, the service labels every aggregation, each
// threshold, wait and severity its alert, the labels every alert, and
// the guard disappears at 0.
func TestGenerateAppliesEveryParameter(t *testing.T) {
	c := DefaultConfig()
	c.Selector = `cluster="eu-1"`
	c.ServiceLabels = []string{"cluster", "service"}
	c.Window = 2 * time.Minute
	c.MinRequestRate = 2.5
	c.RunbookURL = "https://wiki.example.com/rb"
	c.Labels = map[string]string{"team": "payments"}
	c.Shed = Alert{Threshold: 0.07, For: 3 * time.Minute, Severity: "critical"}
	c.ReloadWindow = 30 * time.Minute
	b, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	var exprs []string // the PromQL lines, annotations aside
	for _, line := range strings.Split(s, "\n") {
		if !strings.Contains(line, "summary:") && !strings.Contains(line, "description:") && !strings.Contains(line, "runbook_url:") {
			exprs = append(exprs, line)
		}
	}
	for _, m := range metricSelector.FindAllString(strings.Join(exprs, "\n"), -1) {
		if strings.HasPrefix(m, "resilience_pipeline_name") || strings.HasPrefix(m, "resilience_limiter_name") ||
			strings.HasPrefix(m, "resilience_request_result") || strings.HasPrefix(m, "resilience_event_name") || strings.HasPrefix(m, "resilience_reason") ||
			strings.HasPrefix(m, "resilience_reload_result") {
			continue // label names
		}
		if !strings.Contains(m, `cluster="eu-1"`) {
			t.Errorf("selector %s lacks the configured matcher", m)
		}
	}
	for _, want := range []string{
		"[2m]", "sum by (cluster, service, resilience_limiter_name)", "sum by (cluster, service, instance, resilience_limiter_name)",
		") > 0.07\n", ">= 2.5\n", "for: 3m\n", `severity: "critical"`, `team: "payments"`,
		`runbook_url: "https://wiki.example.com/rb#resiliencehighshedrate"`, "above 7% for 3m, at 2.5 requests/s",
		`absent(resilience_requests_total{cluster="eu-1"})`, `from cluster=\"eu-1\" for 15m`,
		`[30m]) > 0)`, `offset 30m`, "in the last 30m",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the rules lack %q", want)
		}
	}
	if strings.Contains(s, "[5m]") || strings.Count(s, `team: "payments"`) != 9 {
		t.Errorf("the window or the labels did not reach every rule")
	}
	c.MinRequestRate = 0
	if b, _ := Generate(c); bytes.Contains(b, []byte("and\n")) || bytes.Contains(b, []byte("requests/s")) {
		t.Error("MinRequestRate 0 still guards")
	}
	again, _ := Generate(c)
	if once, _ := Generate(c); !bytes.Equal(once, again) {
		t.Error("the same config gave different files")
	}
}
