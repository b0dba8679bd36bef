package adapt_test

import (
	"fmt"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// Render gives the response a rejection gets: every 503 carries
// Retry-After: 1 unless Options.RetryAfter says otherwise; a negative
// value sends none.
func ExampleKit_Render() {
	full := &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonFull}
	for _, d := range []time.Duration{0, 5 * time.Second, -1} {
		m, err := adapt.New(adapt.Framework{}, inbound.Options{RetryAfter: d})
		if err != nil {
			panic(err)
		}
		resp, _ := m.Render(full)
		fmt.Printf("RetryAfter %v: %d, Retry-After %q\n", d, resp.Status, resp.Header.Get("Retry-After"))
	}
	// Output:
	// RetryAfter 0s: 503, Retry-After "1"
	// RetryAfter 5s: 503, Retry-After "5"
	// RetryAfter -1ns: 503, Retry-After ""
}
