// Package promrules generates Prometheus alerting rules for the metrics
// resilienceotel exports, from documented parameters: which series (a
// label selector), which labels name a service, the rate window, a
// minimum request rate below which no share alerts, and each alert's
// threshold, wait and severity. Use it, or its command
// (extensions/otel/cmd/resilience-alerts), to write the rule file of a
// fleet instead of editing a copy of fixed rules.
//
// Every rule has a summary, a description and a runbook_url pointing to
// its section of the runbook (docs/runbook.md in the repository, or a
// copy at Config.RunbookURL). The rules read the names the OpenTelemetry
// Prometheus exporter gives the instruments with its default,
// Prometheus-style translation (resilience_requests_total, …).
//
// examples/metrics/alerts.yml is Generate(DefaultConfig()), unit-tested
// with promtool (alerts_test.yml) and checked against a real /metrics.
package promrules

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Alert is the parameters of one alert. Threshold is read by the alerts
// on a share of requests (a fraction, 0.05 for 5 %) and ignored by the
// others.
type Alert struct {
	// Threshold is the share of requests above which the alert fires,
	// in (0, 1].
	Threshold float64
	// For is how long the condition must hold before the alert fires
	// (Prometheus's for), 0 or more.
	For time.Duration
	// Severity is the value of the alert's severity label ("page",
	// "ticket"), required.
	Severity string
}

// Config is the parameters of the generated rules. Start from
// DefaultConfig and change what differs; Generate checks every field.
type Config struct {
	// Group is the name of the rule group.
	Group string
	// Selector is added to every series selector: label matchers
	// without braces, as `job="api",namespace=~"shop-.*"`. "" selects
	// every service's series. The absent alert needs it to mean one
	// service.
	Selector string
	// ServiceLabels are the labels that tell services apart. The share
	// alerts aggregate by them and the middleware's name, so two services
	// that both name their middleware "api" stay apart. Default
	// namespace and job (a label a series lacks groups as empty).
	ServiceLabels []string
	// Window is the rate window of the share alerts, at least 1 m (four
	// scrapes at 15 s).
	Window time.Duration
	// MinRequestRate is the request rate, per second over Window, below
	// which the share alerts do not fire: at a few requests a minute one
	// shed request is a large share and pages for nothing. 0 turns the
	// guard off.
	MinRequestRate float64
	// RunbookURL is the runbook's address; each alert's runbook_url is
	// it with "#" and the alert's name in lower case (the anchor of its
	// section). Point it to a copy of docs/runbook.md you keep.
	RunbookURL string
	// Labels are added to every alert (team, service tier).
	Labels map[string]string

	// Shed: the share of a middleware's requests refused by its
	// concurrency stage (full, queue-timeout, dropped), for a service.
	Shed Alert
	// Timeout: the share answered 504 at their deadline, for a service.
	Timeout Alert
	// InstanceRefusal: the share refused or timed out on one instance
	// (the one bad pod that a service's share dilutes).
	InstanceRefusal Alert
	// StoreFailClosed: the share refused because the rate limiter's
	// store failed and the limiter fails closed.
	StoreFailClosed Alert
	// StoreFailOpen: the share admitted without a rate-limit decision
	// because the store failed and the limiter fails open.
	StoreFailOpen Alert
	// LateHandlers: handlers still running after their deadline was
	// answered, standing for For.
	LateHandlers Alert
	// LimitAtFloor: the adaptive limit at its configured floor for For.
	LimitAtFloor Alert
	// Absent: no resilience_requests_total series matches Selector for
	// For (the exporter, the scrape or ObserveMiddleware is gone).
	Absent Alert
	// ReloadFailed: a live reconfiguration of a middleware
	// (Middleware.Reconfigure) was refused in the last ReloadWindow, so
	// the instance kept its previous configuration.
	ReloadFailed Alert
	// ReloadWindow is how far back ReloadFailed looks for a refused
	// reload, and so how long it fires after one: whole seconds, at
	// least 1 m.
	ReloadWindow time.Duration
}

// DefaultRunbookURL is the runbook in the repository, for
// Config.RunbookURL.
const DefaultRunbookURL = "https://github.com/ylcnfrht/resilience/blob/main/docs/runbook.md"

// DefaultConfig returns the parameters of examples/metrics/alerts.yml:
//
//	Group "resilience", Selector "", ServiceLabels namespace and job,
//	Window 5m, MinRequestRate 0.1 (30 requests in the window),
//	RunbookURL DefaultRunbookURL
//	Shed             > 5 % for 10m, page
//	Timeout          > 1 % for 10m, page
//	InstanceRefusal  > 20 % for 15m, ticket
//	StoreFailClosed  > 1 % for 5m, page
//	StoreFailOpen    > 1 % for 10m, ticket
//	LateHandlers     for 10m, ticket
//	LimitAtFloor     for 15m, ticket
//	Absent           for 15m, ticket
//	ReloadFailed     any in the last 15m (ReloadWindow), at once, ticket
func DefaultConfig() Config {
	return Config{
		Group:           "resilience",
		ServiceLabels:   []string{"namespace", "job"},
		Window:          5 * time.Minute,
		MinRequestRate:  0.1,
		RunbookURL:      DefaultRunbookURL,
		Shed:            Alert{Threshold: 0.05, For: 10 * time.Minute, Severity: "page"},
		Timeout:         Alert{Threshold: 0.01, For: 10 * time.Minute, Severity: "page"},
		InstanceRefusal: Alert{Threshold: 0.2, For: 15 * time.Minute, Severity: "ticket"},
		StoreFailClosed: Alert{Threshold: 0.01, For: 5 * time.Minute, Severity: "page"},
		StoreFailOpen:   Alert{Threshold: 0.01, For: 10 * time.Minute, Severity: "ticket"},
		LateHandlers:    Alert{For: 10 * time.Minute, Severity: "ticket"},
		LimitAtFloor:    Alert{For: 15 * time.Minute, Severity: "ticket"},
		Absent:          Alert{For: 15 * time.Minute, Severity: "ticket"},
		ReloadFailed:    Alert{Severity: "ticket"},
		ReloadWindow:    15 * time.Minute,
	}
}

// ConfigError reports a Config field Generate cannot use.
type ConfigError struct {
	Field  string // "Selector", "Shed.Threshold", …
	Reason string
}

func (e *ConfigError) Error() string { return "promrules: " + e.Field + ": " + e.Reason }

// ErrConfig matches every *ConfigError (errors.Is).
var ErrConfig = errors.New("promrules: invalid config")

// Is makes errors.Is(err, ErrConfig) hold for a *ConfigError.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

var (
	labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	// matchers is a list of PromQL label matchers without braces.
	matchers = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"([^"\\]|\\.)*"\s*(,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"([^"\\]|\\.)*"\s*)*,?\s*)?$`)
)

// check returns the first field of c Generate cannot use.
func (c Config) check() error {
	bad := func(field, format string, a ...any) error {
		return &ConfigError{Field: field, Reason: fmt.Sprintf(format, a...)}
	}
	if c.Group == "" {
		return bad("Group", "empty")
	}
	if !matchers.MatchString(c.Selector) || strings.Contains(c.Selector, "{{") || strings.Contains(c.Selector, "}}") {
		return bad("Selector", "%q is not a list of label matchers such as job=\"api\",namespace=\"prod\"", c.Selector)
	}
	for _, l := range c.ServiceLabels {
		if !labelName.MatchString(l) {
			return bad("ServiceLabels", "%q is not a label name", l)
		}
	}
	if c.Window < time.Minute || c.Window%time.Second != 0 {
		return bad("Window", "%v: want whole seconds, at least 1m", c.Window)
	}
	if c.ReloadWindow < time.Minute || c.ReloadWindow%time.Second != 0 {
		return bad("ReloadWindow", "%v: want whole seconds, at least 1m", c.ReloadWindow)
	}
	if c.MinRequestRate < 0 || math.IsNaN(c.MinRequestRate) || math.IsInf(c.MinRequestRate, 0) {
		return bad("MinRequestRate", "%v: want 0 or more", c.MinRequestRate)
	}
	if c.RunbookURL == "" || strings.ContainsAny(c.RunbookURL, "#\"\n") {
		return bad("RunbookURL", "%q: want an address without a fragment", c.RunbookURL)
	}
	for k := range c.Labels {
		if !labelName.MatchString(k) || k == "severity" || k == "alertname" {
			return bad("Labels", "%q is not a label name an alert may add", k)
		}
	}
	for _, a := range c.alerts() {
		if a.share && (!(a.Threshold > 0) || a.Threshold > 1) {
			return bad(a.field+".Threshold", "%v: want a share in (0, 1]", a.Threshold)
		}
		if a.For < 0 || a.For%time.Second != 0 {
			return bad(a.field+".For", "%v: want whole seconds, 0 or more", a.For)
		}
		if a.Severity == "" || strings.ContainsAny(a.Severity, "\"\n\\") {
			return bad(a.field+".Severity", "%q: want a plain word", a.Severity)
		}
	}
	return nil
}

// Generate returns the rule file for c, in YAML, as Prometheus and
// promtool load it, or a *ConfigError naming the first field it cannot
// use. The same Config always gives the same bytes.
func Generate(c Config) ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("# Generated by github.com/ylcnfrht/resilience/extensions/otel/promrules; do not edit.\n")
	b.WriteString("# Alerting rules for the metrics of resilienceotel (OpenTelemetry Prometheus\n")
	b.WriteString("# exporter, Prometheus-style names). Each alert's runbook_url is its section\n")
	b.WriteString("# of the runbook.\n")
	fmt.Fprintf(&b, "groups:\n  - name: %s\n    rules:\n", quote(c.Group))
	for _, a := range c.alerts() {
		r := a.rule(c)
		fmt.Fprintf(&b, "      - alert: %s\n", a.name)
		b.WriteString("        expr: |\n")
		for _, line := range strings.Split(strings.TrimRight(r.expr, "\n"), "\n") {
			b.WriteString("          " + line + "\n")
		}
		if a.For > 0 {
			fmt.Fprintf(&b, "        for: %s\n", promDuration(a.For))
		}
		b.WriteString("        labels:\n")
		fmt.Fprintf(&b, "          severity: %s\n", quote(a.Severity))
		keys := make([]string, 0, len(c.Labels))
		for k := range c.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "          %s: %s\n", k, quote(c.Labels[k]))
		}
		b.WriteString("        annotations:\n")
		fmt.Fprintf(&b, "          summary: %s\n", quote(r.summary))
		fmt.Fprintf(&b, "          description: %s\n", quote(r.description))
		fmt.Fprintf(&b, "          runbook_url: %s\n", quote(c.RunbookURL+"#"+strings.ToLower(a.name)))
	}
	return []byte(b.String()), nil
}

// quote is s as a YAML double-quoted scalar.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// promDuration writes d as Prometheus does: "5m", "90s", "1h".
func promDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}
