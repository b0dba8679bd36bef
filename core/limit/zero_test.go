package limit

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Invariant: the zero value of each algorithm is the algorithm with its
// default options: fed the same windows, &Gradient2{} and
// NewGradient2(Gradient2Options{}) (and so for Vegas and AIMD) return the
// same limits, drops and empty windows included.
func TestZeroValueIsDefault(t *testing.T) {
	g, _ := NewGradient2(Gradient2Options{})
	v, _ := NewVegas(VegasOptions{})
	a, _ := NewAIMD(AIMDOptions{})
	for _, c := range []struct {
		name       string
		zero, made Algorithm
	}{
		{"Gradient2", &Gradient2{}, g},
		{"Vegas", &Vegas{}, v},
		{"AIMD", &AIMD{}, a},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			limit := 20.0
			for w := range 500 {
				// Latency rises past a knee of 40, with a drop or an empty
				// window now and then.
				rtt := 10 * time.Millisecond * time.Duration(max(1, limit/40)*(1+r.Float64()/20)*1000) / 1000
				s := Sample{Limit: limit, MinLimit: 1, MaxLimit: 1000, RTT: rtt, MinRTT: rtt, InFlight: int(limit), Samples: 50}
				switch r.IntN(30) {
				case 0:
					s.Drops = 1
				case 1:
					s.Samples = 0
				}
				want, got := c.made.Update(s), c.zero.Update(s)
				if got != want {
					t.Fatalf("window %d: zero value %v, constructor %v", w, got, want)
				}
				limit = min(max(got, 1), 1000)
			}
		})
	}
}
