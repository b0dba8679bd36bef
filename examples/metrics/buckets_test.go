package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestBucketLabelsAreDocumentedDecimals protects le= selectors and sums
// across services: the le labels of the queue-wait and execution
// histograms on the real /metrics are exactly the decimals
// resilienceotel documents (DefaultDurationBuckets, and
// QueueWaitBuckets(100ms) for this service's queue timeout), with no
// float noise such as 0.0025000000000000005.
func TestBucketLabelsAreDocumentedDecimals(t *testing.T) {
	text := string(scrapeTextUnderLoad(t))
	for _, c := range []struct {
		metric string
		want   string
	}{
		{"resilience_queue_wait_seconds_bucket",
			"0.0001 0.00025 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.075 0.09 0.1 0.105 0.125 0.2 0.25 0.5 1 2.5 5 10 +Inf"},
		{"resilience_execution_duration_seconds_bucket",
			"0.0001 0.00025 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 +Inf"},
	} {
		le := regexp.MustCompile(`(?m)^` + c.metric + `\{[^}]*\ble="([^"]+)"`)
		seen := map[string][]string{} // per series (labels but le)
		for _, m := range le.FindAllStringSubmatch(text, -1) {
			series := regexp.MustCompile(`,?le="[^"]+"`).ReplaceAllString(m[0], "")
			seen[series] = append(seen[series], m[1])
		}
		if len(seen) == 0 {
			t.Errorf("%s: no series on /metrics", c.metric)
		}
		for series, got := range seen {
			if strings.Join(got, " ") != c.want {
				t.Errorf("%s le labels:\n got %s\nwant %s", series, strings.Join(got, " "), c.want)
			}
		}
	}
}
