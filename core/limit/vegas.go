package limit

import (
	"math"

	"github.com/ylcnfrht/resilience/core/internal/config"
)

// VegasOptions tunes Vegas; the zero value of each field means its
// default. Alpha, Beta and Threshold are multiples of log10(limit).
type VegasOptions struct {
	// Alpha: below Alpha*log10(limit) estimated queued executions the limit
	// grows by log10(limit). Default 3.
	Alpha float64
	// Beta: above Beta*log10(limit) queued it shrinks by half the
	// estimated queue beyond that, at least log10(limit). Default 6.
	Beta float64
	// Threshold: at or below Threshold*log10(limit) (next to no queue) it
	// grows by Beta*log10(limit). Default 1.
	Threshold float64
	// Smoothing weighs each new limit against the old, in (0, 1]. Default
	// 1 (no smoothing), as Netflix.
	Smoothing float64
	// DropBackoff multiplies the limit after a window with drops, in
	// (0, 1). Default 0.9.
	DropBackoff float64
	// DisableSlowStart starts in the Vegas phase at once.
	DisableSlowStart bool
}

// Vegas is an Algorithm after Netflix concurrency-limits' VegasLimit
// (itself after TCP Vegas): it estimates the executions queued inside the
// service as
//
//	queue = limit * (1 - baseline / RTT)
//
// and grows the limit while the queue is small, holds it between Alpha and
// Beta, and shrinks it above Beta. Choose it over Gradient2, the default,
// for a service whose latency without load is stable, so that the
// smallest window RTT is a trustworthy baseline: it then holds the limit
// still while a few executions queue, instead of probing around the knee.
// Where it deviates from the published algorithm, and why:
//
//   - Above Beta the limit falls by half the estimated queue beyond Beta
//     (at least log10(limit)) per window, not by log10(limit): stepping
//     down by 2 per window takes tens of seconds to come down from a limit
//     far above the knee, while the estimate says how far it is.
//   - The baseline is the smallest window RTT, drift-protected as in
//     Gradient2, instead of a minimum that is reset by periodic probes: a
//     probe during a long incident adopts the overloaded latency as the
//     no-load latency.
//   - A drop backs off multiplicatively (DropBackoff) instead of by
//     log10(limit), since a timeout is the strongest overload signal there
//     is.
//   - Slow start as in Gradient2.
//
// The zero value is Vegas with the default options. Not safe for
// concurrent use: a limiter calls it serially, and each limiter needs its
// own.
type Vegas struct {
	opts VegasOptions
	base baseline
	ss   slowStart
}

// NewVegas returns the algorithm, or a *resilience.ConfigError naming the
// first invalid field.
func NewVegas(opts VegasOptions) (*Vegas, error) {
	v := &Vegas{opts: opts}
	if err := v.validate(); err != nil {
		return nil, err
	}
	v.setDefaults()
	return v, nil
}

// setDefaults fills the options left zero and the state they set. Update
// calls it on first use, so that the zero value works.
func (v *Vegas) setDefaults() {
	o := &v.opts
	if o.Alpha == 0 {
		o.Alpha = 3
	}
	if o.Beta == 0 {
		o.Beta = 6
	}
	if o.Threshold == 0 {
		o.Threshold = 1
	}
	if o.Smoothing == 0 {
		o.Smoothing = 1
	}
	if o.DropBackoff == 0 {
		o.DropBackoff = 0.9
	}
	v.base = baseline{up: 0.1, down: 1, tolerance: 1.05}
	v.ss.done = o.DisableSlowStart
}

// validate reports invalid options as a *config.Error.
func (v *Vegas) validate() error {
	o := v.opts
	for _, f := range []struct {
		name string
		v    float64
	}{{"Alpha", o.Alpha}, {"Beta", o.Beta}, {"Threshold", o.Threshold}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return config.Errorf("VegasOptions."+f.name, "must be a finite number not below 0, got %v", f.v)
		}
	}
	a, b := o.Alpha, o.Beta
	if a == 0 {
		a = 3
	}
	if b == 0 {
		b = 6
	}
	if a > b {
		return config.Errorf("VegasOptions.Alpha", "must not exceed Beta (%v), got %v", b, a)
	}
	if o.Smoothing != 0 && !(o.Smoothing > 0 && o.Smoothing <= 1) {
		return config.Errorf("VegasOptions.Smoothing", "must be in (0, 1], got %v", o.Smoothing)
	}
	if o.DropBackoff != 0 && !(o.DropBackoff > 0 && o.DropBackoff < 1) {
		return config.Errorf("VegasOptions.DropBackoff", "must be in (0, 1), got %v", o.DropBackoff)
	}
	return nil
}

// Update implements Algorithm.
func (v *Vegas) Update(s Sample) float64 {
	if v.base.up == 0 { // the zero value, before its first window
		v.setDefaults()
	}
	if s.Drops > 0 {
		v.ss.end()
		return s.Limit * v.opts.DropBackoff
	}
	if s.Samples == 0 {
		return s.Limit
	}
	rtt := float64(s.RTT)
	v.base.observe(s, rtt)
	limit := s.Limit
	lg := math.Log10(max(limit, 10)) // at least 1, so small limits still move
	queue := math.Ceil(limit * (1 - v.base.rtt/rtt))
	if l, ok := v.ss.grow(s, queue > v.opts.Threshold*lg); ok {
		return l
	}
	if float64(s.InFlight)*2 < limit {
		return limit
	}
	var next float64
	switch {
	case queue <= v.opts.Threshold*lg:
		next = limit + v.opts.Beta*lg
	case queue < v.opts.Alpha*lg:
		next = limit + lg
	case queue > v.opts.Beta*lg:
		next = limit - max(lg, (queue-v.opts.Beta*lg)/2)
	default:
		return limit
	}
	return limit*(1-v.opts.Smoothing) + next*v.opts.Smoothing
}
