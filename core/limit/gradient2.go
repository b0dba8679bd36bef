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
	// probed one permit at a time instead (see Gradient2, "Settling at the
	// knee"), so no queue of this size stands inside the service.
	QueueSize func(limit float64) float64
	// DropBackoff multiplies the limit after a window with drops, in
	// (0, 1). Default 0.9.
	DropBackoff float64
	// DisableSlowStart starts in the gradient phase at once.
	DisableSlowStart bool
}

// Gradient2 is the default Algorithm, after Netflix concurrency-limits'
// Gradient2Limit: it compares the window's mean RTT (the short RTT) with a
// long-term baseline and sets
//
//	gradient = max(0.5, min(1, Tolerance * baseline / shortRTT))
//	newLimit = limit * gradient + QueueSize(limit)
//	limit    = limit * (1 - Smoothing) + newLimit * Smoothing
//
// so in the published algorithm, while latency is flat, the limit grows by
// the queue size and as soon as latency climbs it falls in proportion, at
// most halving per window (here the formula applies only above the
// tolerance; see "Settling at the knee" below). Where it deviates from the
// published algorithm, and why:
//
//   - Slow start: from resilience.AdaptiveLimiterOptions.InitialLimit the
//     limit doubles every other window while latency stays within
//     Tolerance, and the first window past it
//     applies the gradient without smoothing, whichever window of the
//     doubling cycle it falls in (when a drop ends slow start, the drop
//     backs off and the next window with samples is the first one past
//     it). Without slow start, growing by a few permits per window takes
//     tens of seconds to reach a limit of hundreds; without the full
//     correction, the overshoot of the last doubling would take many
//     windows to come down.
//   - Drops are used: a window with drops multiplies the limit by
//     DropBackoff. The published algorithm ignores drops, so steady
//     timeouts, whose latency is never seen, let the limit grow to the
//     maximum.
//   - The baseline is drift-protected (it rises only when the limit cannot
//     be the cause: at MinLimit, or with the service below half its limit)
//     instead of an average of every sample, which during a long incident
//     learns the overloaded latency as normal.
//   - Smoothing defaults to 0.5, not 0.2: with 0.2 the limit grows by a
//     fifth of QueueSize per window, so after a capacity step back up it
//     took more than ten seconds to regrow (measured on loopback, 100 →
//     50 → 100 slots of 200 ms: 321 then 420 of 500 req/s in the two 5 s
//     windows after the step); with 0.5 it is back within five seconds,
//     and a window mean is already an average of many executions.
//   - Tolerance defaults to 1.05, not 1.5: samples are window means, much
//     less noisy than single requests, and since the limit settles where
//     gradient = 1 - QueueSize/limit, a tolerance of 1.5 settles where
//     latency is over 1.5 times the baseline, half of it spent queueing
//     inside the service. With 1.05 the proportional correction alone
//     settles within about 10 % above the knee.
//   - Settling at the knee: the published algorithm settles where
//     limit = Tolerance × knee + QueueSize (Little's law makes
//     limit × baseline / RTT the knee while the limit is above it), so
//     Tolerance × knee − knee + QueueSize executions always wait inside
//     the service: 6 of 56 at a knee of 50. Measured on loopback (50
//     slots of 200 ms), that put the admitted p99 at 1.6 times the service
//     time, since the waiting ones wait for the next slot to free. Gradient2
//     therefore corrects in proportion only while latency is far above
//     the baseline or for the first windows; after three windows in a row
//     congested only mildly (gradient at least 0.8: a standing queue near
//     the knee) with the limit in use (in flight at least half of it), it
//     sets the limit to the knee by Little's law (the limit
//     of the window before × the RTT last measured without a queue / the
//     RTT). While latency is within the tolerance it searches the knee
//     instead of adding QueueSize every window: it holds the limit for
//     four windows, then probes it, one permit up if the limit is known
//     not to queue, one permit down otherwise, and keeps a probe only if
//     latency answered it as below the knee (no rise when the limit rose,
//     a fall when it fell). A probe is judged by comparing window means
//     before and after it, not against the baseline, so the baseline's
//     bias does not enter; a change counts if it exceeds 0.5 % (0.25 %
//     for a fall) and three times the measured noise between windows. A
//     first probe up lasts one window and the limit returns while the
//     executions it admitted are measured, so at the knee a probe costs
//     one execution's wait; kept probes double, and after two kept the
//     limit holds each step while it is judged (growth is as fast as slow
//     start's); a rejected one halves back towards the knee. A service
//     whose latency is too noisy for such probes (changes under 3 × noise
//     are not seen) keeps the proportional correction's settling point.
//
// Gradient2 is not safe for concurrent use; a limiter calls it serially.
// Build it with NewGradient2: resilience.NewAdaptiveLimiter refuses a
// zero or nil *Gradient2 with a *resilience.ConfigError. Update has no
// error result; a panic in QueueSize leaves the window's effect on the
// baseline and on slow start in place, and the limiter keeps its limit.
type Gradient2 struct {
	built bool // by NewGradient2 (see unbuilt)
	opts  Gradient2Options
	base  baseline
	ss    slowStart
	knee  kneeSearch
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
	g.built = true
	return g, nil
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
