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
// The zero value is AIMD with the default options. Not safe for
// concurrent use: a limiter calls it serially, and each limiter needs its
// own.
type AIMD struct {
	opts AIMDOptions
	ss   slowStart
}

// NewAIMD returns the algorithm, or a *resilience.ConfigError naming the
// first invalid field.
func NewAIMD(opts AIMDOptions) (*AIMD, error) {
	a := &AIMD{opts: opts}
	if err := a.validate(); err != nil {
		return nil, err
	}
	a.setDefaults()
	return a, nil
}

// setDefaults fills the options left zero and the state they set. Update
// calls it on first use (BackoffRatio is 0 only before), so that the zero
// value works.
func (a *AIMD) setDefaults() {
	if a.opts.BackoffRatio == 0 {
		a.opts.BackoffRatio = 0.9
	}
	if a.opts.Timeout == 0 {
		a.opts.Timeout = 5 * time.Second
	}
	a.ss.done = a.opts.DisableSlowStart
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
	if a.opts.BackoffRatio == 0 {
		a.setDefaults()
	}
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
