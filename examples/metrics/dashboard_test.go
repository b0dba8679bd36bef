package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// grafanaVars are the dashboard's variables with what they stand for in a
// query: any job, namespace, instance and middleware (the value of All),
// and Grafana's rate interval.
var grafanaVars = strings.NewReplacer("$job", ".*", "$namespace", ".*", "$instance", ".*", "$limiter", ".*", "$__rate_interval", "1m")

// markedVars replaces the variables with marks a test can find in the
// parsed matchers.
var markedVars = strings.NewReplacer("$job", "JOB", "$namespace", "NAMESPACE", "$instance", "INSTANCE", "$limiter", "LIMITER", "$__rate_interval", "1m")

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDashboardFiltersEveryQuery protects the dashboard for a fleet: the
// variables job, namespace, instance and limiter exist, each narrowed by
// the ones before it, and every series selector of every panel (Queue
// wait and Execution duration included) is filtered by all four, the
// middleware by its limiter or pipeline name, so that two services that
// both call their middleware "api" never merge.
func TestDashboardFiltersEveryQuery(t *testing.T) {
	d := readDashboard(t)
	var names []string
	for _, v := range d.Templating.List {
		names = append(names, v.Name)
	}
	if strings.Join(names, " ") != "datasource job namespace instance limiter" {
		t.Fatalf("variables %v", names)
	}
	for i, v := range d.Templating.List[2:] {
		for _, before := range names[1 : i+2] {
			if !strings.Contains(v.Definition, "$"+before) {
				t.Errorf("variable %s is not narrowed by $%s: %s", v.Name, before, v.Definition)
			}
		}
	}
	n := 0
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(markedVars.Replace(q.Expr))
			if err != nil {
				t.Fatalf("%s: %v", p.Title, err)
			}
			for _, vs := range selectors(expr) {
				n++
				got := map[string]string{}
				for _, m := range vs.LabelMatchers {
					if m.Type == labels.MatchRegexp {
						got[m.Name] = m.Value
					}
				}
				middleware := got["resilience_limiter_name"]
				if middleware == "" {
					middleware = got["resilience_pipeline_name"]
				}
				if got["job"] != "JOB" || got["namespace"] != "NAMESPACE" || got["instance"] != "INSTANCE" || middleware != "LIMITER" {
					t.Errorf("%s: %s is not filtered by $job, $namespace, $instance and $limiter", p.Title, vs)
				}
			}
		}
	}
	if n < 19 { // 18 queries, one of them a ratio of two
		t.Fatalf("only %d selectors", n)
	}
}

// TestDashboardQueriesSelectExportedSeries protects dashboard.json from
// drifting away from the exporter: it has the panels an operator needs,
// and every query in it (its variable's too) selects series that the
// running service's /metrics really has, with the labels it groups by.
func TestDashboardQueriesSelectExportedSeries(t *testing.T) {
	d := readDashboard(t)
	titles := map[string]bool{}
	for _, p := range d.Panels {
		titles[p.Title] = true
	}
	for _, want := range []string{"Goodput and requests", "Shed by reason", "Queue wait", "Limit against in flight", "Late handlers and timeouts", "Rate limited", "Execution duration by outcome", "Rate-limit store errors"} {
		if !titles[want] {
			t.Errorf("no panel %q (panels: %v)", want, titles)
		}
	}

	families := scrapeUnderLoad(t)
	n := 0
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			checkExpr(t, p.Title, grafanaVars.Replace(q.Expr), families)
			n++
		}
	}
	for _, v := range d.Templating.List {
		if metric, ok := strings.CutPrefix(v.Definition, "label_values("); ok {
			i := strings.LastIndex(metric, ",")
			sel, label := grafanaVars.Replace(metric[:i]), strings.TrimSpace(strings.TrimSuffix(metric[i+1:], ")"))
			checkExpr(t, "variable "+v.Name, sel, families)
			name, _, _ := strings.Cut(sel, "{")
			if targetLabels[label] {
				continue // the scrape's, not on /metrics
			}
			if f := families[strings.TrimSpace(name)]; f == nil || len(f.GetMetric()) == 0 || !hasLabel(f.GetMetric()[0].GetLabel(), label) {
				t.Errorf("variable %s: %s has no label %s", v.Name, name, label)
			}
		}
	}
	t.Logf("%d queries checked against %d metric families", n, len(families))
}

func hasLabel(labels []*dto.LabelPair, name string) bool {
	for _, l := range labels {
		if l.GetName() == name {
			return true
		}
	}
	return false
}
