package limit

import (
	"math"
	"time"

	"github.com/ylcnfrht/resilience/core/internal/config"
)

// Sample summarises the executions an adaptive limiter saw finish in one
// sampling window: what an Algorithm decides on.
type Sample struct {
	// Limit is the limit in force, unrounded (the algorithm's last answer,
	// clamped to [MinLimit, MaxLimit]).
	Limit float64
	// MinLimit and MaxLimit are the limiter's bounds.
	MinLimit, MaxLimit int
	// RTT is the mean round-trip time of the sampled executions (queue wait
	// excluded); 0 when the window held only drops.
	RTT time.Duration
	// MinRTT is the shortest sampled round-trip time; 0 with no samples.
	MinRTT time.Duration
	// InFlight is the most executions in flight at once during the window.
	// Well below Limit means the service was not using its limit (it was
	// app-limited), so the window says nothing about a higher one.
	InFlight int
	// CPUWait is the limiter's latest reading of how long a goroutine of
	// the process waits for a CPU (Go's scheduler; read at most every
	// 10 ms), which drives its CPU gate, not the limit (see
	// resilience.AdaptiveLimiter); 0 with
	// resilience.AdaptiveLimiterOptions.IgnoreCPUWait.
	CPUWait time.Duration
	// Samples is the number of executions counted as samples, Drops the
	// number counted as drops (timeouts, overload).
	Samples int
	Drops   int
}

// Algorithm computes an adaptive limiter's limit. Update is called once
// per sampling window with its summary and returns the new limit; the
// limiter clamps it to [MinLimit, MaxLimit] and ignores NaN and infinities.
// The limiter never calls Update concurrently for one limiter and calls it
// outside its lock, so an algorithm needs no locking of its own, but an
// algorithm value holds per-limiter state and must not be shared by two
// limiters. An algorithm may implement resilience.Validator;
// resilience.NewAdaptiveLimiter then checks it. A nil
// resilience.AdaptiveLimiterOptions.Algorithm means a new Gradient2. Update has no
// error result; if it panics, the limiter keeps its previous limit, hands
// the next window over as usual, and reports the panic as
// event.HookPanic (see package resilience, User hooks); the
// execution whose release closed the window goes on unharmed.
type Algorithm interface {
	Update(s Sample) float64
}

// baseline is the no-load round-trip time the delay-based algorithms
// compare with, protected against drift. It starts at the first window's
// mean (a limiter's first window closes after ten samples, executions
// admitted before any load built up) and falls with every faster window,
// but it rises only when the limit cannot be what made latency rise: when
// the service is app-limited (in flight below half the limit) and the
// window is within the tolerance, or the limit already sits at MinLimit.
// Otherwise a long incident would teach it that overloaded latency is
// normal: the limit settles a little above the knee, where latency is a
// little above the baseline, and a baseline that followed would move the
// knee up every time, until the limit reached MaxLimit. A service that
// became slower for good (a slow dependency) still gets its new baseline:
// its limit falls to MinLimit, and from there the baseline follows.
type baseline struct {
	rtt       float64 // nanoseconds; 0 until the first sample
	up, down  float64 // smoothing factors for rising and falling
	tolerance float64 // app-limited windows within it may raise it
}

func (b *baseline) observe(s Sample, rtt float64) {
	switch {
	case b.rtt == 0:
		b.rtt = rtt
	case rtt < b.rtt:
		b.rtt += (rtt - b.rtt) * b.down
	case s.Limit <= float64(s.MinLimit) || (float64(s.InFlight)*2 < s.Limit && rtt <= b.rtt*b.tolerance):
		b.rtt += (rtt - b.rtt) * b.up
	}
}

// slowStart doubles the limit every other window while latency stays flat,
// and ends for good at the first sign of queueing or a drop. Every other
// window, because the window right after an increase still measures
// executions admitted under the old limit.
type slowStart struct {
	done bool
	skip bool // the last window doubled the limit; the next one holds it
	// ended is set when slow start ends; Gradient2 clears it at its first
	// correction after it, which it applies in full. A flag of its own:
	// skip may be in either state when congestion first shows, and which
	// one it is must not decide how hard the overshoot is corrected.
	ended bool
}

// end leaves slow start (a no-op once it is over).
func (ss *slowStart) end() {
	if !ss.done {
		ss.done = true
		ss.ended = true
	}
}

// grow reports the limit to use while in slow start, or false once slow
// start is over (the caller then applies its algorithm).
func (ss *slowStart) grow(s Sample, congested bool) (float64, bool) {
	if ss.done {
		return 0, false
	}
	if congested {
		ss.end()
		return 0, false
	}
	if ss.skip || float64(s.InFlight)*2 < s.Limit {
		ss.skip = false
		return s.Limit, true
	}
	ss.skip = true
	return s.Limit * 2, true
}

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

// kneeSearch holds Gradient2's limit at the knee once latency is within
// the tolerance (see Gradient2, "Settling at the knee"). It judges a move
// of the limit by comparing window mean RTTs before and after it, so the
// baseline's error (it is a drift-protected, low-biased average) does not
// enter the decision, only the noise between windows, which it measures
// where nothing queues.
type kneeSearch struct {
	probe int  // 0 holding (cruise), probeUp or probeDown
	skip  bool // the limit just moved: this window still measures the old one
	// valid: the limit in force is known not to queue (a probe up to it
	// did not raise latency, or a probe below it did not lower latency).
	valid bool
	n     int     // cruise windows measured at this limit
	sum   float64 // their RTTs
	last  float64 // the previous cruise window's RTT, for the noise
	noise float64 // mean relative RTT change between cruise windows
	ref   float64 // the RTT the probe is judged against
	from  float64 // the limit before the probe
	step  float64 // the probe's size, in permits
	// clean is the mean RTT at the last limit known not to queue: the
	// no-queue latency the Little's-law estimate divides by (0 unknown).
	clean  float64
	over   int     // consecutive congested windows
	prev   float64 // the limit of the previous window
	hold   bool    // the limit was just set to the knee; let one window pass
	peek   bool    // a probe up is in force for one window, then reverts
	kept   int     // probes up kept in a row
	peeked bool    // the probe being measured was a peek
	bisect bool    // a probe up was rejected: narrowing the knee down
	again  bool    // peek again after this window
	low    float64 // the fastest window of a probe's measurement
}

const (
	probeUp   = 1
	probeDown = -1
	// kneeCruise is the number of windows the limit holds between probes
	// (the first one after a move is not measured).
	kneeCruise = 4
	// kneeMeasure is the number of windows a probe is judged on: an
	// execution it admitted may wait for the service and finish a window
	// late.
	kneeMeasure = 2
	// kneePeeks is the number of probes up in a row that last one window
	// each; once as many were kept, the service has room above and the
	// next ones hold their limit while they are judged, to grow faster.
	kneePeeks = 2
	// kneeGradient and kneeCongested: after kneeCongested windows in a row
	// congested only mildly (gradient at least kneeGradient, as at the
	// proportional correction's settling point), the queue stands and the
	// limit goes to the Little's-law knee. Farther above the knee, and for
	// the first windows, the proportional correction brings the limit
	// down: it is fast, and a burst that congests a window is no standing
	// queue.
	kneeGradient  = 0.8
	kneeCongested = 3
	// kneeRise and kneeFall are the least relative changes of the mean RTT
	// that count as a probe's effect, whatever the noise: a rise of 0.5 %
	// rejects a probe up, a fall of 0.25 % keeps a probe down. Above them,
	// kneeNoise times the measured noise between windows counts.
	kneeRise  = 0.005
	kneeFall  = 0.0025
	kneeNoise = 3
	// kneeNoiseStart is the noise assumed before any was measured, and
	// kneeNoiseWindows the time constant, in windows, of its average.
	kneeNoiseStart   = 0.003
	kneeNoiseWindows = 5
)

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
	k := &g.knee
	prev := k.prev
	k.prev = s.Limit
	if prev == 0 {
		prev = s.Limit
	}
	if gradient == 1 && float64(s.InFlight)*2 < s.Limit {
		k.reset(false)
		return s.Limit // app-limited: no evidence for a higher limit
	}
	if k.hold {
		k.hold = false
		return s.Limit
	}
	if gradient < 1 && k.probe != probeUp {
		// Little's law gives the knee only while the limit is in use: an
		// app-limited window (in flight below half the limit) says nothing
		// about it.
		if gradient >= kneeGradient && float64(s.InFlight)*2 >= s.Limit {
			k.over++
		} else {
			k.over = 0
		}
		if k.over >= kneeCongested {
			// The queue stands: go to the knee, the concurrency that the
			// window's throughput needs without waiting (Little's law:
			// limit × no-queue RTT / RTT), judged from the limit in force
			// when the measured executions were admitted.
			clean := k.clean
			if clean == 0 || clean > short {
				clean = g.base.rtt
			}
			k.reset(false)
			k.hold = true
			return min(s.Limit, prev) * clean / short
		}
		k.reset(false)
		newLimit := s.Limit*gradient + g.opts.QueueSize(s.Limit)
		if full {
			return newLimit
		}
		return s.Limit*(1-g.opts.Smoothing) + newLimit*g.opts.Smoothing
	}
	k.over = 0
	return k.search(s, short)
}

// reset ends a probe and restarts the cruise; valid says whether the
// limit in force is known not to queue. The noise and the no-queue RTT
// are kept.
func (k *kneeSearch) reset(valid bool) {
	*k = kneeSearch{valid: valid, noise: k.noise, clean: k.clean, prev: k.prev, over: k.over}
}

// search moves the limit while latency is within the tolerance: it holds
// for kneeCruise windows, then probes down if the limit is not known to be
// free of queueing, up otherwise, and keeps a probe only if latency
// answered it as a limit below the knee does: not rising when the limit
// rose, falling when it fell.
func (k *kneeSearch) search(s Sample, rtt float64) float64 {
	if k.skip {
		k.skip = false
		return s.Limit
	}
	if k.again {
		k.again, k.peek = false, true
		return k.from + k.step
	}
	if k.peek {
		// The window with the probe's permits is over: back to the limit
		// while the executions they admitted finish and are measured,
		// from the next window on.
		k.peek, k.peeked = false, true
		return k.from
	}
	rise := max(kneeRise, kneeNoise*k.noise)
	fall := max(kneeFall, kneeNoise*k.noise)
	if k.peeked || k.probe == probeUp {
		// An execution admitted by the probe may wait for the service and
		// finish a window late: the probe is judged on the slowest of
		// kneeMeasure windows.
		k.sum = max(k.sum, rtt)
		if k.n == 0 || rtt < k.low {
			k.low = rtt
		}
		k.n++
		if k.n < kneeMeasure {
			return s.Limit
		}
		rtt = k.sum
		k.sum, k.n, k.peeked = 0, 0, false
	}
	switch k.probe {
	case probeUp:
		if rtt <= k.ref*(1+rise) {
			// Not queueing: keep it. Probe twice as far while there is
			// room, or half as far while narrowing the knee down.
			k.valid = true
			next := k.from + k.step
			k.ref = min(k.ref, rtt)
			if k.bisect {
				k.step /= 2
				if k.step < 1 {
					k.reset(true)
					k.skip = true
					return next
				}
			} else {
				k.step *= 2
				k.kept++
			}
			k.from, k.peek = next, k.bisect || k.kept < kneePeeks
			return next + k.step
		}
		from := k.from
		if k.clean > 0 && k.low > k.clean*(1+rise) {
			// Even the fastest window queued: the limit the probe started
			// from is above the knee itself. Probe down from it.
			k.probe, k.bisect, k.again = probeDown, false, false
			k.valid, k.step, k.ref, k.skip = false, 1, k.low, true
			return max(from-k.step, float64(s.MinLimit))
		}
		if k.step >= 2 {
			// The knee is between from and from + step: halve the step and
			// peek again once the probe's executions are gone.
			k.step /= 2
			k.bisect, k.again, k.skip = true, true, true
			return from
		}
		k.reset(true)
		k.skip = true
		return from
	case probeDown:
		if rtt < k.ref*(1-fall) {
			// The lower limit queued less: keep it and go on down, twice
			// as far.
			k.from, k.ref, k.skip = s.Limit, rtt, true
			k.step *= 2
			return max(s.Limit-k.step, float64(s.MinLimit))
		}
		// No better: the limit above did not queue measurably, and this
		// is its latency without a queue.
		from := k.from
		k.reset(true)
		k.clean = rtt
		k.skip = true
		return from
	}
	if k.valid && k.last > 0 {
		// The noise between windows, measured where nothing queues. A
		// change is counted as at most twice the noise so far: one slow
		// window (a collection, a busy machine) raises it a fifth, not
		// tenfold, and steady noise is followed within a few windows.
		d := min(math.Abs(rtt-k.last)/rtt, 2*k.noise)
		k.noise += (d - k.noise) / kneeNoiseWindows
	}
	k.last = rtt
	k.sum += rtt
	k.n++
	if k.valid && k.clean > 0 && rtt > k.clean*(1+rise) {
		k.valid = false // latency rose at this limit: the knee moved down
	}
	if k.n < kneeCruise-1 {
		return s.Limit
	}
	k.ref = k.sum / float64(k.n)
	k.n, k.sum, k.last = 0, 0, 0
	k.from, k.skip, k.step = s.Limit, true, 1
	if !k.valid && k.clean > 0 && k.ref <= k.clean*(1+rise) {
		k.valid = true // as fast as at the last limit known not to queue
	}
	if k.valid {
		// At a limit known not to queue, a probe up costs the executions
		// it admits beyond the knee their wait for the service: it lasts
		// one window, then the limit returns while they are measured.
		k.clean = k.ref
		k.probe, k.peek, k.skip = probeUp, true, false
		return s.Limit + k.step
	}
	k.probe = probeDown
	return max(s.Limit-k.step, float64(s.MinLimit))
}

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
// Not safe for concurrent use; a limiter calls it serially. Build it with
// NewVegas: its zero value (whose options are zero rather than the
// defaults) and a nil *Vegas are refused by resilience.NewAdaptiveLimiter
// with a *resilience.ConfigError. Update has no error result and calls no
// code of the caller's, so it leaves no partial state.
type Vegas struct {
	built bool // by NewVegas (see unbuilt)
	opts  VegasOptions
	base  baseline
	ss    slowStart
}

// NewVegas returns the algorithm, or a *resilience.ConfigError naming the
// first invalid field.
func NewVegas(opts VegasOptions) (*Vegas, error) {
	v := &Vegas{opts: opts}
	if err := v.validate(); err != nil {
		return nil, err
	}
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
	v.built = true
	return v, nil
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
