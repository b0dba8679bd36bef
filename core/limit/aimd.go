package limit

import (
	"time"

	"github.com/ylcnfrht/resilience/core/internal/config"
)

// AIMDOptions tunes AIMD; the zero value of each field means its default.
type AIMDOptions struct {
	// BackoffRatio multiplies the limit after a window with drops or a
	// mean RTT above Timeout, in (0, 1). Default 0.9, as Netflix.
	BackoffRatio float64
	// Timeout: a window whose mean RTT exceeds it counts as a drop.
	// Default 5s, as Netflix; set it near the latency the service must
	// keep, since it is AIMD's only latency signal.
	Timeout time.Duration
	// DisableSlowStart starts in the additive phase at once.
	DisableSlowStart bool
}

// AIMD is an Algorithm after Netflix concurrency-limits' AIMDLimit: it
// adds one to the limit per window while the service uses at least half
// of it, and multiplies it by BackoffRatio after a window with drops or a
// mean RTT above Timeout. It reacts to nothing else, so it suits services
// whose overload shows as timeouts rather than as rising latency.
// Deviations: it adds one per window (a round trip), not per sample, which
// would double the limit every round trip at any size; and it starts with
// the slow start of Gradient2, ended by the first backoff.
//
// Not safe for concurrent use; a limiter calls it serially. Build it with
// NewAIMD: its zero value (BackoffRatio and Timeout 0, which would set the
// limit to MinLimit on every window) and a nil *AIMD are refused by
// resilience.NewAdaptiveLimiter with a *resilience.ConfigError. Update has no error result and calls no code of the
// caller's, so it leaves no partial state.
type AIMD struct {
	built bool // by NewAIMD (see unbuilt)
	opts  AIMDOptions
	ss    slowStart
}

// NewAIMD returns the algorithm, or a *resilience.ConfigError naming the
// first invalid field.
func NewAIMD(opts AIMDOptions) (*AIMD, error) {
	a := &AIMD{opts: opts}
	if err := a.validate(); err != nil {
		return nil, err
	}
	if a.opts.BackoffRatio == 0 {
		a.opts.BackoffRatio = 0.9
	}
	if a.opts.Timeout == 0 {
		a.opts.Timeout = 5 * time.Second
	}
	a.ss.done = opts.DisableSlowStart
	a.built = true
	return a, nil
}

// validate reports invalid options as a *config.Error.
func (a *AIMD) validate() error {
	if r := a.opts.BackoffRatio; r != 0 && !(r > 0 && r < 1) {
		return config.Errorf("AIMDOptions.BackoffRatio", "must be in (0, 1), got %v", r)
	}
	return config.NonNegativeDuration("AIMDOptions.Timeout", a.opts.Timeout)
}

// Update implements Algorithm.
func (a *AIMD) Update(s Sample) float64 {
	if s.Drops > 0 || (s.Samples > 0 && s.RTT > a.opts.Timeout) {
		a.ss.end()
		return s.Limit * a.opts.BackoffRatio
	}
	if s.Samples == 0 {
		return s.Limit
	}
	if l, ok := a.ss.grow(s, false); ok {
		return l
	}
	if float64(s.InFlight)*2 < s.Limit {
		return s.Limit
	}
	return s.Limit + 1
}

// unbuilt names the constructor of alg when alg is one of this package's
// algorithms that did not come from it (a zero value or a nil pointer,
// which Update cannot run on), and returns "" otherwise.
// resilience.NewAdaptiveLimiter refuses such an algorithm through
// config.UnbuiltAlgorithm.
func unbuilt(alg any) string {
	switch a := alg.(type) {
	case *Gradient2:
		if a == nil || !a.built {
			return "limit.NewGradient2"
		}
	case *Vegas:
		if a == nil || !a.built {
			return "limit.NewVegas"
		}
	case *AIMD:
		if a == nil || !a.built {
			return "limit.NewAIMD"
		}
	}
	return ""
}

func init() { config.UnbuiltAlgorithm = unbuilt }
