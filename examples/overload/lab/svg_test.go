package lab

import (
	"strings"
	"testing"
	"time"
)

// The chart draws the load period only: the partial buckets after the
// load stopped would read as a collapse. A series that answered nothing
// for the rest of the run says so, and the goodput axis leaves headroom
// above the capacity line.
func TestChartLeavesOutTheTailAndNotesSilence(t *testing.T) {
	cfg := Config{Scenario: "overload", Rate: 800, Duration: 3 * time.Second, ClientTimeout: time.Second, Series: time.Second, Service: ServiceCPU}
	rep := &Report{Config: cfg, Capacity: 500, Results: []Result{
		{Contender: "none", Series: []Point{{T: 1, Goodput: 300, P99: 900}, {T: 2}, {T: 3}, {T: 4, Partial: true}}},
		{Contender: "fixed", Series: []Point{{T: 1, Goodput: 500, Shed: 300, P99: 200}, {T: 2, Goodput: 500, Shed: 300, P99: 200}, {T: 3, Goodput: 500, Shed: 300, P99: 200}, {T: 4, Goodput: 90, Shed: 1, P99: 200, Partial: true}}},
	}}
	var b strings.Builder
	if err := rep.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	if !strings.Contains(svg, "nothing in time after 1s") {
		t.Errorf("no note that none answered nothing after 1 s:\n%s", svg)
	}
	if strings.Count(svg, "nothing in time") != 1 {
		t.Errorf("a series that answered to the end is noted as silent")
	}
	// The x axis ends at the load's end (3 s): no tick at 4.
	if strings.Contains(svg, `text-anchor="middle">4</text>`) {
		t.Errorf("the chart draws past the load's end")
	}
	// Goodput axis: 500 × 1.15 rounds up to 600.
	if !strings.Contains(svg, `text-anchor="end">600</text>`) {
		t.Errorf("no headroom above capacity 500 on the goodput axis")
	}
}
