package promrules_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/ylcnfrht/resilience/extensions/otel/promrules"
)

// The rules of one service, with a page when 2 % of its requests are
// shed, a guard at one request per second and the team's runbook.
func Example() {
	c := promrules.DefaultConfig()
	c.Selector = `namespace="shop",job="checkout"`
	c.MinRequestRate = 1
	c.Shed.Threshold = 0.02
	c.RunbookURL = "https://wiki.example.com/resilience-runbook"
	b, err := promrules.Generate(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	// Write b to the file Prometheus loads; here, its alerts.
	for _, line := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(line, "      - alert: "); ok {
			fmt.Println(name)
		}
	}
	// Output:
	// ResilienceHighShedRate
	// ResilienceHighTimeoutRate
	// ResilienceInstanceHighRefusalRate
	// ResilienceRateLimitStoreFailingClosed
	// ResilienceRateLimitStoreFailingOpen
	// ResilienceLateHandlers
	// ResilienceLimitAtFloor
	// ResilienceMetricsAbsent
	// ResilienceReloadFailed
}
