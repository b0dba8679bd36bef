package limit

import "github.com/ylcnfrht/resilience/core/internal/config"

// Gradient2Options tunes Gradient2; the zero value of each field means its
// default.
type Gradient2Options struct {
	// Tolerance is how far the window's mean RTT may exceed the baseline
	// before the limit falls. Default 1.05 (Netflix: 1.5; see Gradient2).
	Tolerance float64
	// Smoothing weighs each new limit against the old, in (0, 1]. Default
	// 0.5 (Netflix: 0.2; see Gradient2).
	Smoothing float64
	// BaselineWindows is the time constant, in windows, of the baseline's
	// exponential average. Default 20 (Netflix averages 600 samples; ours
	// are window means, each already an average).
	BaselineWindows int
	// QueueSize returns the headroom the proportional correction adds to
	// the limit (limit × gradient + QueueSize) while latency is above the
	// tolerance. Default 4, as Netflix. Within the tolerance the limit is
	// probed one permit at a time instead (see Gradient2), so no queue of
	// this size stands inside the service.
	QueueSize func(limit float64) float64
	// DropBackoff multiplies the limit after a window with drops, in
	// (0, 1). Default 0.9.
	DropBackoff float64
	// DisableSlowStart starts in the gradient phase at once.
	DisableSlowStart bool
}

// Gradient2 is the default Algorithm. It starts from Netflix
// concurrency-limits' Gradient2Limit, which compares each window's mean
// RTT with a long-term baseline and moves the limit in proportion:
//
//	gradient = max(0.5, min(1, Tolerance × baseline / RTT))
//	limit    = limit × (1 − Smoothing) + (limit × gradient + QueueSize(limit)) × Smoothing
//
// It applies that formula only while latency is above the tolerance, and
// differs from the published algorithm where the lab showed it must:
//
//   - Slow start: the limit doubles every other window until latency
//     rises, and the first correction after it is not smoothed.
//   - A window with drops multiplies the limit by DropBackoff (the
//     published algorithm ignores drops, so steady timeouts let the limit
//     grow to the maximum).
//   - The baseline rises only when the limit cannot be what raised
//     latency (at MinLimit, or with the service using under half of it),
//     so a long incident does not teach it that overloaded is normal.
//   - At the knee it settles on the knee itself, where the published
//     algorithm keeps Tolerance × knee + QueueSize − knee executions
//     queued inside the service: after three mildly congested windows in
//     a row it sets the limit to the knee by Little's law, and while
//     latency is within the tolerance it holds the limit and probes it one
//     permit up or down, keeping a probe only if the window mean RTT
//     answered it as a limit below the knee does.
//   - Tolerance 1.05 and Smoothing 0.5 (Netflix: 1.5 and 0.2), since a
//     sample is a window's mean, not one request.
//
// BENCHMARKS.md has the measurements behind these choices. The zero value
// is Gradient2 with the default options. Not safe for concurrent use: a
// limiter calls it serially, and each limiter needs its own. A panic in
// QueueSize leaves the window's effect on the baseline and on slow start
// in place, and the limiter keeps its limit.
type Gradient2 struct {
	opts Gradient2Options
	base baseline
	ss   slowStart
	knee kneeSearch
}

// defaultGradient2Smoothing is Gradient2Options.Smoothing's default.
const defaultGradient2Smoothing = 0.5

// NewGradient2 returns the algorithm, or a *resilience.ConfigError naming the
// first invalid field.
func NewGradient2(opts Gradient2Options) (*Gradient2, error) {
	g := &Gradient2{opts: opts}
	if err := g.validate(); err != nil {
		return nil, err
	}
	g.setDefaults()
	return g, nil
}

// setDefaults fills the options left zero and the state they set. Update
// calls it on first use, so that the zero value works.
func (g *Gradient2) setDefaults() {
	o := &g.opts
	if o.Tolerance == 0 {
		o.Tolerance = 1.05
	}
	if o.Smoothing == 0 {
		o.Smoothing = defaultGradient2Smoothing
	}
	if o.BaselineWindows == 0 {
		o.BaselineWindows = 20
	}
	if o.QueueSize == nil {
		o.QueueSize = func(float64) float64 { return 4 }
	}
	if o.DropBackoff == 0 {
		o.DropBackoff = 0.9
	}
	alpha := 2 / float64(o.BaselineWindows+1)
	g.base = baseline{up: alpha, down: alpha, tolerance: o.Tolerance}
	g.ss.done = o.DisableSlowStart
	g.knee.noise = kneeNoiseStart
}

// validate reports invalid options as a *config.Error.
func (g *Gradient2) validate() error {
	o := g.opts
	if o.Tolerance != 0 && !(o.Tolerance >= 1 && o.Tolerance <= 10) {
		return config.Errorf("Gradient2Options.Tolerance", "must be between 1 and 10, got %v", o.Tolerance)
	}
	if o.Smoothing != 0 && !(o.Smoothing > 0 && o.Smoothing <= 1) {
		return config.Errorf("Gradient2Options.Smoothing", "must be in (0, 1], got %v", o.Smoothing)
	}
	if err := config.NonNegativeInt("Gradient2Options.BaselineWindows", o.BaselineWindows); err != nil {
		return err
	}
	if o.DropBackoff != 0 && !(o.DropBackoff > 0 && o.DropBackoff < 1) {
		return config.Errorf("Gradient2Options.DropBackoff", "must be in (0, 1), got %v", o.DropBackoff)
	}
	return nil
}

// Update implements Algorithm.
func (g *Gradient2) Update(s Sample) float64 {
	if g.base.up == 0 { // the zero value, before its first window
		g.setDefaults()
	}
	if s.Drops > 0 {
		g.ss.end()
		return s.Limit * g.opts.DropBackoff
	}
	if s.Samples == 0 {
		return s.Limit
	}
	short := float64(s.RTT)
	g.base.observe(s, short)
	gradient := max(0.5, min(1, g.opts.Tolerance*g.base.rtt/short))
	if l, ok := g.ss.grow(s, gradient < 1); ok {
		return l
	}
	// The first window with samples after slow start corrects its
	// overshoot in full; later ones are smoothed.
	full := g.ss.ended
	g.ss.ended = false
	limit, correct := g.knee.update(s, short, gradient, g.base.rtt)
	if !correct {
		return limit
	}
	newLimit := s.Limit*gradient + g.opts.QueueSize(s.Limit)
	if full {
		return newLimit
	}
	return s.Limit*(1-g.opts.Smoothing) + newLimit*g.opts.Smoothing
}
