package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func parseRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile("alerts.yml", false, model.UTF8Validation,
		parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return groups
}

// TestAlertRulesParse protects alerts.yml as a rules file Prometheus would
// load: valid YAML with no unknown fields, valid PromQL and templates, and
// the four documented alerts.
func TestAlertRulesParse(t *testing.T) {
	groups := parseRules(t)
	var names []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	want := []string{"ResilienceHighShedRate", "ResilienceHighTimeoutRate", "ResilienceLateHandlers", "ResilienceLimitAtFloor"}
	if len(names) != len(want) {
		t.Fatalf("alerts %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("alerts %v, want %v", names, want)
		}
	}
}

// TestAlertRulesAreGeneric protects the rules from being tied to one
// service: no selector picks a limiter or pipeline by name, and no rule
// compares a limit with a number (the floor comes from
// resilience_limiter_min_limit).
func TestAlertRulesAreGeneric(t *testing.T) {
	for _, g := range parseRules(t).Groups {
		for _, r := range g.Rules {
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				switch n := n.(type) {
				case *parser.VectorSelector:
					for _, m := range n.LabelMatchers {
						if m.Name == "resilience_limiter_name" || m.Name == "resilience_pipeline_name" {
							t.Errorf("%s: %s picks one %s", r.Alert, n, m.Name)
						}
					}
				case *parser.BinaryExpr:
					if strings.Contains(n.LHS.String(), "resilience_limiter_limit") {
						if _, ok := n.RHS.(*parser.NumberLiteral); ok {
							t.Errorf("%s: compares the limit with the number %s", r.Alert, n.RHS)
						}
					}
				}
				return nil
			})
		}
	}
}

// TestAlertRulesSelectExportedSeries protects the rules from drifting away
// from the exporter: while the service sheds and has late handlers, every
// selector in every rule selects at least one series of its /metrics, and
// every label the rules group by exists on those series. A renamed
// instrument, attribute or value breaks it.
func TestAlertRulesSelectExportedSeries(t *testing.T) {
	families := scrapeUnderLoad(t)
	for _, g := range parseRules(t).Groups {
		for _, r := range g.Rules {
			checkExpr(t, r.Alert, r.Expr, families)
		}
	}
}

// scrapeUnderLoad runs the service in-process, makes it shed and run late
// handlers, and returns its /metrics.
func scrapeUnderLoad(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	svc, err := newService(500*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.close(context.Background())
	srv := httptest.NewServer(svc.handler)
	defer srv.Close()

	get := func(path string) (int, []byte) {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	// Late handlers: they ignore their context and outlive the 500 ms
	// timeout (504) by far.
	release := time.Now().Add(3 * time.Second)
	var late sync.WaitGroup
	for range 2 {
		late.Go(func() {
			if code, _ := get("/work?ignore-deadline=1&ms=" + strconv.Itoa(int(time.Until(release).Milliseconds()))); code != http.StatusGatewayTimeout {
				t.Errorf("late handler: status %d, want 504", code)
			}
		})
	}
	late.Wait() // the 504s are back; the handlers run on
	// Shedding: a burst well past the limit (20) and the queue (20).
	var burst sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 80 {
		burst.Go(func() {
			code, _ := get("/work?ms=300")
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	burst.Wait()
	if codes[http.StatusServiceUnavailable] == 0 {
		t.Fatalf("the burst shed nothing: %v", codes)
	}

	_, body := get("/metrics")
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// checkExpr parses a PromQL expression and checks it against scraped
// families: every selector selects at least one series, and every label
// an aggregation groups by is on those series (job and instance, the
// scraper's target labels, aside).
func checkExpr(t *testing.T, what, src string, families map[string]*dto.MetricFamily) {
	t.Helper()
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(src)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			if len(selectSeries(families, n)) == 0 {
				t.Errorf("%s: %s selects no series of /metrics", what, n)
			}
		case *parser.AggregateExpr:
			for _, vs := range selectors(n.Expr) {
				for _, s := range selectSeries(families, vs) {
					for _, l := range n.Grouping {
						if l == "job" || l == "instance" {
							continue // the scraper's target labels
						}
						if _, ok := s[l]; !ok {
							t.Errorf("%s: groups by %s, absent from %s", what, l, vs)
						}
					}
				}
			}
		}
		return nil
	})
}

func selectors(e parser.Expr) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

// selectSeries returns the label sets (with __name__) of the scraped
// series vs selects. A histogram family contributes its _count, _sum and
// _bucket series (with an le label).
func selectSeries(families map[string]*dto.MetricFamily, vs *parser.VectorSelector) []map[string]string {
	var out []map[string]string
	for name, f := range families {
		names := []string{name}
		if f.GetType() == dto.MetricType_HISTOGRAM {
			names = []string{name + "_count", name + "_sum", name + "_bucket"}
		}
		for _, series := range names {
			for _, m := range f.GetMetric() {
				ls := map[string]string{"__name__": series}
				if strings.HasSuffix(series, "_bucket") {
					ls["le"] = "+Inf" // each bucket is a series of its own
				}
				for _, lp := range m.GetLabel() {
					ls[lp.GetName()] = lp.GetValue()
				}
				ok := true
				for _, mt := range vs.LabelMatchers {
					if !mt.Matches(ls[mt.Name]) {
						ok = false
						break
					}
				}
				if ok {
					out = append(out, ls)
				}
			}
		}
	}
	return out
}
