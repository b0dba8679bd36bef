package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/ratelimit"
	"github.com/ylcnfrht/resilience/extensions/otel/promrules"
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
// load: valid YAML with no unknown fields, valid PromQL and templates, the
// documented alerts, and summary, description and runbook_url on each.
func TestAlertRulesParse(t *testing.T) {
	groups := parseRules(t)
	var names []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s has no %s", r.Alert, a)
				}
			}
		}
	}
	want := []string{"ResilienceHighShedRate", "ResilienceHighTimeoutRate", "ResilienceInstanceHighRefusalRate",
		"ResilienceRateLimitStoreFailingClosed", "ResilienceRateLimitStoreFailingOpen",
		"ResilienceLateHandlers", "ResilienceLimitAtFloor", "ResilienceMetricsAbsent", "ResilienceReloadFailed"}
	if !slices.Equal(names, want) {
		t.Fatalf("alerts %v, want %v", names, want)
	}
}

// TestAlertsFileIsGenerated protects alerts.yml from hand edits that the
// generator would undo: it is exactly promrules.Generate(DefaultConfig()),
// what go generate writes (see main.go).
func TestAlertsFileIsGenerated(t *testing.T) {
	want, err := promrules.Generate(promrules.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("alerts.yml is not the generator's output: run go generate in examples/metrics")
	}
}

// TestAlertRulesSelectorReachesEverySelector protects Config.Selector as
// PromQL sees it: with a selector of two matchers, every series selector
// of every rule parses and carries both, so no rule of one service reads
// another's series.
func TestAlertRulesSelectorReachesEverySelector(t *testing.T) {
	c := promrules.DefaultConfig()
	c.Selector = `namespace="shop", job=~"checkout|cart"`
	b, err := promrules.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(b, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Fatal(err)
	}
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			for _, vs := range selectors(expr) {
				n++
				var ns, job bool
				for _, m := range vs.LabelMatchers {
					ns = ns || (m.Name == "namespace" && m.Type == labels.MatchEqual && m.Value == "shop")
					job = job || (m.Name == "job" && m.Type == labels.MatchRegexp && m.Value == "checkout|cart")
				}
				if !ns || !job {
					t.Errorf("%s: %s lacks the selector", r.Alert, vs)
				}
			}
		}
	}
	if n < 22 { // 3 in each of the 5 share alerts, 1 + 2 + 1 + 3 in the others
		t.Fatalf("only %d selectors checked", n)
	}
}

// TestRunbookHasEverySection protects the runbook_url links: each points
// to a section of docs/runbook.md whose heading is the alert's name.
func TestRunbookHasEverySection(t *testing.T) {
	md, err := os.ReadFile("../../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, line := range strings.Split(string(md), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			headings[strings.ToLower(strings.TrimSpace(h))] = true
		}
	}
	for _, g := range parseRules(t).Groups {
		for _, r := range g.Rules {
			url := r.Annotations["runbook_url"]
			_, anchor, ok := strings.Cut(url, "#")
			if !ok || !strings.HasPrefix(url, promrules.DefaultRunbookURL+"#") || !headings[anchor] || anchor != strings.ToLower(r.Alert) {
				t.Errorf("%s: runbook_url %q is not a section of docs/runbook.md", r.Alert, url)
			}
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
	body := scrapeTextUnderLoad(t)
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// scrapeTextUnderLoad is scrapeUnderLoad's /metrics as the exposition
// text it is.
func scrapeTextUnderLoad(t *testing.T) []byte {
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

	// A rate-limit store that fails, under a middleware failing open and
	// one failing closed: the store alerts' events.
	for _, closed := range []bool{false, true} {
		name := "store-fail-open"
		if closed {
			name = "store-fail-closed"
		}
		mw, err := inbound.New(inbound.Options{
			Name:      name,
			RateLimit: &resilience.RateLimiterOptions{PermitLimit: 10, Window: time.Minute, Store: downStore{}, FailClosed: closed},
			Listener:  svc.metrics,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer svc.metrics.ObserveMiddleware(name, mw)()
		rec := httptest.NewRecorder()
		mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if want := map[bool]int{false: http.StatusOK, true: http.StatusServiceUnavailable}[closed]; rec.Code != want {
			t.Fatalf("%s: status %d, want %d", name, rec.Code, want)
		}
	}

	// A live reload the middleware refuses: the reload alert's series.
	reloaded, err := inbound.New(inbound.Options{Name: "reloaded", Timeout: time.Second, Listener: svc.metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := reloaded.Reconfigure(inbound.Options{Name: "reloaded", Timeout: -time.Second, Listener: svc.metrics}); err == nil {
		t.Fatal("Reconfigure took a negative timeout")
	}

	_, body := get("/metrics")
	return body
}

// downStore is a rate-limit store whose every take fails, as one that
// cannot be reached does.
type downStore struct{}

func (downStore) Take(context.Context, string, ratelimit.Policy) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.New("store unreachable")
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
	made := map[string]bool{} // labels label_replace writes
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if c, ok := n.(*parser.Call); ok && c.Func.Name == "label_replace" {
			if s, ok := c.Args[1].(*parser.StringLiteral); ok {
				made[s.Val] = true
			}
		}
		return nil
	})
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
						if targetLabels[l] || made[l] {
							continue // the scraper's target labels, or made by label_replace
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

// targetLabels are the labels Prometheus's scrape adds to every series
// (job, instance, and a Kubernetes namespace by relabelling), which the
// service's /metrics cannot have.
var targetLabels = map[string]bool{"job": true, "instance": true, "namespace": true}

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
