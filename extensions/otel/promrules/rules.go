package promrules

import (
	"strconv"
	"strings"
)

// Series and values the rules read, as the Prometheus exporter names
// resilienceotel's instruments.
const (
	requests  = "resilience_requests_total"
	events    = "resilience_events_total"
	late      = "resilience_limiter_late"
	limit     = "resilience_limiter_limit"
	minLimit  = "resilience_limiter_min_limit"
	limiterL  = "resilience_limiter_name"
	resultL   = "resilience_request_result"
	shedding  = "full|queue-timeout|dropped"
	refusing  = "full|queue-timeout|dropped|timeout"
	storeErr  = "OnRateLimiterStoreError"
	reloads   = "resilience_reloads_total"
	reloadL   = "resilience_reload_result"
	pipelineL = "resilience_pipeline_name"
	instanceL = "instance"
)

// alertDef is one alert: its name, its Config field and what it reads.
type alertDef struct {
	Alert
	name  string
	field string
	share bool // Threshold is read
	make  func(c Config, a Alert) rule
}

// rule is an alert's expression and annotations.
type rule struct {
	expr, summary, description string
}

// alerts lists c's alerts in the order of the rule file.
func (c Config) alerts() []alertDef {
	return []alertDef{
		{c.Shed, "ResilienceHighShedRate", "Shed", true, shedRule},
		{c.Timeout, "ResilienceHighTimeoutRate", "Timeout", true, timeoutRule},
		{c.InstanceRefusal, "ResilienceInstanceHighRefusalRate", "InstanceRefusal", true, instanceRule},
		{c.StoreFailClosed, "ResilienceRateLimitStoreFailingClosed", "StoreFailClosed", true, storeRule("fail-closed")},
		{c.StoreFailOpen, "ResilienceRateLimitStoreFailingOpen", "StoreFailOpen", true, storeRule("fail-open")},
		{c.LateHandlers, "ResilienceLateHandlers", "LateHandlers", false, lateRule},
		{c.LimitAtFloor, "ResilienceLimitAtFloor", "LimitAtFloor", false, floorRule},
		{c.Absent, "ResilienceMetricsAbsent", "Absent", false, absentRule},
		{c.ReloadFailed, "ResilienceReloadFailed", "ReloadFailed", false, reloadRule},
	}
}

func (a alertDef) rule(c Config) rule { return a.make(c, a.Alert) }

// sel is a selector of metric with the matchers m and Config.Selector.
func (c Config) sel(metric string, m ...string) string {
	if s := strings.TrimSuffix(strings.TrimSpace(c.Selector), ","); s != "" {
		m = append(m, s)
	}
	if len(m) == 0 {
		return metric
	}
	return metric + "{" + strings.Join(m, ",") + "}"
}

func (c Config) rate(selector string) string {
	return "rate(" + selector + "[" + promDuration(c.Window) + "])"
}

// by is the aggregation labels: the service's, then extra.
func (c Config) by(extra ...string) string {
	return "sum by (" + strings.Join(append(append([]string(nil), c.ServiceLabels...), extra...), ", ") + ")"
}

// shareExpr is numerator / every request, both summed by the labels of
// agg, above the threshold, where the requests reach MinRequestRate.
func (c Config) shareExpr(agg, numerator string, threshold float64) string {
	total := agg + " (" + c.rate(c.sel(requests)) + ")"
	e := "(\n  " + numerator + "\n  /\n  " + total + "\n) > " + number(threshold) + "\n"
	if c.MinRequestRate > 0 {
		e += "and\n" + total + " >= " + number(c.MinRequestRate) + "\n"
	}
	return e
}

// service is the service labels as Prometheus template text.
func (c Config) service(extra ...string) string {
	var parts []string
	for _, l := range append(append([]string(nil), c.ServiceLabels...), extra...) {
		parts = append(parts, l+"={{ $labels."+l+" }}")
	}
	return strings.Join(parts, " ")
}

// window says over what and from what traffic on a share alert holds.
func (c Config) window(a Alert) string {
	s := "over " + promDuration(c.Window) + " windows, above " + percent(a.Threshold) + " for " + promDuration(a.For)
	if c.MinRequestRate > 0 {
		s += ", at " + number(c.MinRequestRate) + " requests/s or more"
	}
	return s
}

func shedRule(c Config, a Alert) rule {
	agg := c.by(limiterL)
	return rule{
		expr:    c.shareExpr(agg, agg+" ("+c.rate(c.sel(requests, resultL+`=~"`+shedding+`"`))+")", a.Threshold),
		summary: "{{ $labels." + limiterL + " }} sheds {{ $value | humanizePercentage }} of its requests",
		description: "Middleware {{ $labels." + limiterL + " }} (" + c.service() + ") refused {{ $value | humanizePercentage }} " +
			"of its requests at its concurrency limit (queue full, queue timeout, dropped) " + c.window(a) + ".",
	}
}

func timeoutRule(c Config, a Alert) rule {
	agg := c.by(limiterL)
	return rule{
		expr:    c.shareExpr(agg, agg+" ("+c.rate(c.sel(requests, resultL+`="timeout"`))+")", a.Threshold),
		summary: "{{ $labels." + limiterL + " }} answers {{ $value | humanizePercentage }} of its requests with a timeout",
		description: "Middleware {{ $labels." + limiterL + " }} (" + c.service() + ") answered {{ $value | humanizePercentage }} " +
			"of its requests 504 at their deadline " + c.window(a) + ".",
	}
}

func instanceRule(c Config, a Alert) rule {
	agg := c.by(instanceL, limiterL)
	return rule{
		expr: c.shareExpr(agg, agg+" ("+c.rate(c.sel(requests, resultL+`=~"`+refusing+`"`))+")", a.Threshold),
		summary: "{{ $labels." + limiterL + " }} on {{ $labels.instance }} refuses or times out " +
			"{{ $value | humanizePercentage }} of its requests",
		description: "Middleware {{ $labels." + limiterL + " }} (" + c.service(instanceL) + ") refused or timed out " +
			"{{ $value | humanizePercentage }} of its requests on this instance alone " + c.window(a) + ".",
	}
}

// storeRule alerts on the rate limiter's store errors of one kind, as a
// share of the middleware's requests: the events carry the middleware's
// name as their pipeline.
func storeRule(reason string) func(c Config, a Alert) rule {
	return func(c Config, a Alert) rule {
		agg := c.by(limiterL)
		num := agg + " (\n    label_replace(\n      " +
			c.rate(c.sel(events, `resilience_event_name="`+storeErr+`"`, `resilience_reason="`+reason+`"`)) +
			",\n      \"" + limiterL + "\", \"$1\", \"resilience_pipeline_name\", \"(.*)\"\n    )\n  )"
		r := rule{expr: c.shareExpr(agg, num, a.Threshold)}
		if reason == "fail-closed" {
			r.summary = "{{ $labels." + limiterL + " }} refuses {{ $value | humanizePercentage }} of its requests: its rate-limit store fails"
			r.description = "The rate-limit store of middleware {{ $labels." + limiterL + " }} (" + c.service() +
				") failed for {{ $value | humanizePercentage }} of its requests, each refused 503 (the limiter fails closed), " + c.window(a) + "."
		} else {
			r.summary = "{{ $labels." + limiterL + " }} admits {{ $value | humanizePercentage }} of its requests unchecked: its rate-limit store fails"
			r.description = "The rate-limit store of middleware {{ $labels." + limiterL + " }} (" + c.service() +
				") failed for {{ $value | humanizePercentage }} of its requests, each admitted without a quota decision (the limiter fails open), " + c.window(a) + "."
		}
		return r
	}
}

func lateRule(c Config, a Alert) rule {
	return rule{
		expr:    c.sel(late) + " > 0\n",
		summary: "{{ $labels." + limiterL + " }} on {{ $labels.instance }} has had handlers running past their deadline for " + promDuration(a.For),
		description: "{{ $value }} handlers of middleware {{ $labels." + limiterL + " }} (" + c.service(instanceL) +
			") are running after their deadline was answered, and there have been some for " + promDuration(a.For) +
			": they hold permits for requests nobody waits for.",
	}
}

func floorRule(c Config, a Alert) rule {
	return rule{
		expr:    c.sel(limit) + " <= " + c.sel(minLimit) + "\n",
		summary: "the adaptive limit of {{ $labels." + limiterL + " }} on {{ $labels.instance }} has been at its floor for " + promDuration(a.For),
		description: "The adaptive limit of middleware {{ $labels." + limiterL + " }} (" + c.service(instanceL) +
			") has been at its configured floor ({{ $value }}) for " + promDuration(a.For) +
			": latency stays high whatever the concurrency, so the cause is elsewhere.",
	}
}

func absentRule(c Config, a Alert) rule {
	what := "any service"
	if s := strings.TrimSpace(c.Selector); s != "" {
		what = s
	}
	return rule{
		expr:    "absent(" + c.sel(requests) + ")\n",
		summary: "no resilience request counts from " + what + " for " + promDuration(a.For),
		description: "Prometheus has had no " + requests + " series from " + what + " for " + promDuration(a.For) +
			": the shedding, timeout and store alerts cannot fire without them.",
	}
}

// reloadRule fires while a refused reload is at most ReloadWindow old.
// The counter's series appears with the first refusal, already at 1,
// which increase cannot see (it has no earlier sample to rise from): a
// failed series that did not exist ReloadWindow ago counts as well. The
// reloads carry the middleware's name as their pipeline.
func reloadRule(c Config, a Alert) rule {
	failed := c.sel(reloads, reloadL+`="failed"`)
	w := promDuration(c.ReloadWindow)
	return rule{
		expr: c.by(instanceL, limiterL) + " (\n  label_replace(\n    (increase(" + failed + "[" + w + "]) > 0)\n    or\n    (" +
			failed + " unless " + failed + " offset " + w + "),\n    \"" + limiterL + "\", \"$1\", \"" + pipelineL + "\", \"(.*)\"\n  )\n) > 0\n",
		summary: "{{ $labels." + limiterL + " }} on {{ $labels.instance }} refused a configuration reload in the last " + w,
		description: "Middleware {{ $labels." + limiterL + " }} (" + c.service(instanceL) + ") refused a live reconfiguration " +
			"(Middleware.Reconfigure) in the last " + w + ": the instance serves its previous configuration, " +
			"not the one deployed, unless a later reload applied.",
	}
}

// number writes v as PromQL and Prometheus templates read it.
func number(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// percent writes a share as a percentage without float noise (7 %, not
// 7.000000000000001 %).
func percent(v float64) string { return strconv.FormatFloat(v*100, 'g', 6, 64) + "%" }
