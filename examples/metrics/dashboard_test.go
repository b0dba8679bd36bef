package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
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
// query: any middleware, and Grafana's rate interval.
var grafanaVars = strings.NewReplacer("$limiter", ".+", "$__rate_interval", "1m")

// TestDashboardQueriesSelectExportedSeries protects dashboard.json from
// drifting away from the exporter: it has the panels an operator needs,
// and every query in it (its variable's too) selects series that the
// running service's /metrics really has, with the labels it groups by.
func TestDashboardQueriesSelectExportedSeries(t *testing.T) {
	b, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	titles := map[string]bool{}
	for _, p := range d.Panels {
		titles[p.Title] = true
	}
	for _, want := range []string{"Goodput and requests", "Shed by reason", "Queue wait", "Limit against in flight", "Late handlers and timeouts", "Rate limited"} {
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
			name, label, _ := strings.Cut(strings.TrimSuffix(metric, ")"), ",")
			checkExpr(t, "variable "+v.Name, name, families)
			if f := families[strings.TrimSpace(name)]; f == nil || len(f.GetMetric()) == 0 || !hasLabel(f.GetMetric()[0].GetLabel(), strings.TrimSpace(label)) {
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
