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

// Gradient2 is the default Algorithm. Like Netflix concurrency-limits'
// Gradient2Limit, it compares each window's mean RTT with a long-term
// baseline and, while latency is above Tolerance × baseline, cuts the
// limit in proportion:
//
//	gradient = max(0.5, Tolerance × baseline / RTT)
//	limit    = limit × (1 − Smoothing) + (limit × gradient + QueueSize(limit)) × Smoothing
//
// Unlike it, it settles on the knee (the most executions the service runs
// without a queue) rather than QueueSize and a tolerance above it: after
// three mildly congested windows in a row it sets the limit to the knee
// by Little's law, and within the tolerance it holds the limit and probes
// it one permit at a time, keeping a probe only if latency answered it as
// a limit below the knee does (a service too noisy between windows for
// one permit to show settles where the proportional correction does, a
// little above the knee). It also starts with a slow start (the
// limit doubles every other window until latency rises, or grows up to
// fourfold while that much demand waits in the queue), backs off by
// DropBackoff after a window with drops, lets the baseline rise only when
// the limit cannot be what raised latency, and defaults to Tolerance 1.05
// and Smoothing 0.5 (Netflix: 1.5 and 0.2), since a sample is a window's
// mean. BENCHMARKS.md has the measurements behind these choices.
//
// The zero value is Gradient2 with the default options. Not safe for
// concurrent use: a limiter calls it serially, and each limiter needs its
// own. A panic in QueueSize leaves the window's effect on the baseline
// and on slow start in place, and the limiter keeps its limit.
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
	// Not Netflix's 1.5: the proportional correction settles where
	// gradient = 1 − QueueSize/limit, so 1.5 holds latency at 1.5 × the
	// baseline, a third of it queueing, and a window's mean is far less
	// noisy than one request's RTT.
	if o.Tolerance == 0 {
		o.Tolerance = 1.05
	}
	// Not Netflix's 0.2: with it the limit regrew by a fifth of QueueSize
	// per window, for over ten seconds after a capacity step back up
	// (BENCHMARKS.md, step).
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
