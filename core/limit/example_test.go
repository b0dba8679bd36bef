package limit_test

import (
	"fmt"
	"log"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/limit"
)

// An adaptive limiter with Vegas instead of the default Gradient2.
func Example() {
	alg, err := limit.NewVegas(limit.VegasOptions{DisableSlowStart: true})
	if err != nil {
		log.Fatal(err)
	}
	l, err := resilience.NewAdaptiveLimiter(resilience.AdaptiveLimiterOptions{
		Algorithm: alg,
		MinLimit:  10,
		MaxLimit:  200,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("initial limit:", l.Stats().Limit)
	// Output: initial limit: 20
}

// latencyTarget is a custom Algorithm: it adds one permit per window while
// the mean round-trip time stays under a target and backs off by a tenth
// otherwise.
type latencyTarget struct{ target time.Duration }

func (a latencyTarget) Update(s limit.Sample) float64 {
	if s.Drops > 0 || s.RTT > a.target {
		return s.Limit * 0.9
	}
	if s.InFlight*2 < int(s.Limit) {
		return s.Limit // the service did not use its limit: no evidence for more
	}
	return s.Limit + 1
}

func ExampleAlgorithm() {
	var alg limit.Algorithm = latencyTarget{target: 50 * time.Millisecond}
	fast := limit.Sample{Limit: 20, MinLimit: 1, MaxLimit: 100, RTT: 30 * time.Millisecond, InFlight: 20, Samples: 40}
	slow := fast
	slow.RTT = 80 * time.Millisecond
	fmt.Printf("%.1f %.1f\n", alg.Update(fast), alg.Update(slow))

	// A limiter calls Update once per sampling window.
	if _, err := resilience.NewAdaptiveLimiter(resilience.AdaptiveLimiterOptions{Algorithm: alg}); err != nil {
		log.Fatal(err)
	}
	// Output: 21.0 18.0
}

// Invalid options are a *resilience.ConfigError naming the field.
func ExampleNewGradient2() {
	_, err := limit.NewGradient2(limit.Gradient2Options{Smoothing: 2})
	fmt.Println(err)
	// Output: resilience: invalid option Gradient2Options.Smoothing: must be in (0, 1], got 2
}

// The zero value of an algorithm is the algorithm with its default
// options. Its first window at flat latency, with the limit in use, is
// slow start's first doubling.
func ExampleGradient2() {
	var g limit.Gradient2
	s := limit.Sample{Limit: 20, MinLimit: 1, MaxLimit: 1000, RTT: 10 * time.Millisecond, InFlight: 20, Samples: 50}
	fmt.Println(g.Update(s))
	// Output: 40
}
