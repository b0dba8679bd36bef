package resilience

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/limit"
)

// simService is the synthetic service of the simulations: its latency is
// flat (base) up to a concurrency knee K and grows linearly beyond it, so
// its throughput is capped at K/base whatever the concurrency. A small
// deterministic jitter (±5 %) keeps executions from moving in lockstep.
type simService struct {
	base time.Duration

	mu        sync.Mutex
	knee      int
	inFlight  int
	seq       uint64
	completed []int // completions per simulated second
}

func (s *simService) setKnee(k int) {
	s.mu.Lock()
	s.knee = k
	s.mu.Unlock()
}

// call runs one execution: it holds a slot of the service for its latency.
func (s *simService) call(start time.Time) {
	s.mu.Lock()
	s.inFlight++
	s.seq++
	jitter := 0.95 + 0.1*float64((s.seq*2654435761)%1000)/1000
	load := max(1, float64(s.inFlight)/float64(s.knee))
	base := s.base
	s.mu.Unlock()
	time.Sleep(time.Duration(float64(base) * load * jitter))
	s.mu.Lock()
	s.inFlight--
	sec := int(time.Since(start) / time.Second)
	for len(s.completed) <= sec {
		s.completed = append(s.completed, 0)
	}
	s.completed[sec]++
	s.mu.Unlock()
}

// goodput returns the completions in [from, to) seconds over the
// capacity K/base of that span.
func (s *simService) goodput(from, to, knee int) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i := from; i < to && i < len(s.completed); i++ {
		n += s.completed[i]
	}
	capacity := float64(knee) / s.base.Seconds() * float64(to-from)
	return float64(n) / capacity
}

// simPhase changes the knee at a simulated time.
type simPhase struct {
	at   time.Duration
	knee int
}

// simRun offers rate executions per second, open loop, to a limiter in
// front of svc for d, changing the knee per phases, and returns the limit
// sampled every 100 ms.
func simRun(lim Strategy, stats func() LimiterStats, svc *simService, rate int, d time.Duration, phases []simPhase) []int {
	start := time.Now()
	var wg sync.WaitGroup
	var limits []int
	ctx := context.Background()
	next := func(context.Context) error { svc.call(start); return nil }
	const tick = 10 * time.Millisecond
	perTick := float64(rate) * tick.Seconds()
	owed := 0.0
	pi := 0
	for el := time.Duration(0); el < d; el += tick {
		for pi < len(phases) && phases[pi].at <= el {
			svc.setKnee(phases[pi].knee)
			pi++
		}
		if el%(100*time.Millisecond) == 0 {
			limits = append(limits, stats().Limit)
		}
		owed += perTick
		for ; owed >= 1; owed-- {
			wg.Go(func() { _ = lim.Execute(ctx, Telemetry{}, next) })
		}
		time.Sleep(tick)
	}
	wg.Wait()
	return limits
}

// simFigures are the adaptation figures of one run, as reported.
type simFigures struct {
	reach90       time.Duration // first time the limit reached 90 % of K
	settleMin     int           // limit range in the settled phase
	settleMax     int
	goodput       float64       // settled-phase goodput over capacity
	halvedWithin  time.Duration // time after K halved until the limit stayed within 25 % of it
	halvedMin     int
	halvedMax     int
	doubledBefore int // limit when K doubled back, and 5 s / 10 s later
	doubled5s     int
	doubledReach  time.Duration // time after K doubled back until the limit first reached it
	doubled10s    int
}

func (f simFigures) String() string {
	return fmt.Sprintf("reach 90%% of K: %v; settled limit %d..%d (K=100), goodput %.1f%%; after K 100→50: within ±25%% after %v, then %d..%d; after K 50→100: %d → %d (5 s) → %d (10 s), K reached after %v",
		f.reach90, f.settleMin, f.settleMax, 100*f.goodput, f.halvedWithin, f.halvedMin, f.halvedMax, f.doubledBefore, f.doubled5s, f.doubled10s, f.doubledReach)
}

// simAdaptive runs the standard scenario for an algorithm: K = 100 for
// 20 s, then 50 for 15 s, then 100 again for 15 s, with load offered at
// 1.5 times the K = 100 capacity. Samples are every 100 ms.
//
// The simulations run in a synctest bubble, where time is fake but the
// runtime's scheduler latencies the CPU gate reads are real: on a loaded
// machine they would close the gate in the middle of a simulated run. So
// they leave the gate off (IgnoreCPUWait); cpugate_test.go tests it with
// a reading the test controls.
func simAdaptive(t *testing.T, alg limit.Algorithm, initial int) simFigures {
	const base = 100 * time.Millisecond
	var f simFigures
	synctest.Test(t, func(t *testing.T) {
		lim, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{Algorithm: alg, InitialLimit: initial, IgnoreCPUWait: true})
		if err != nil {
			t.Fatal(err)
		}
		svc := &simService{base: base, knee: 100}
		limits := simRun(lim, lim.Stats, svc, 1500, 50*time.Second,
			[]simPhase{{0, 100}, {20 * time.Second, 50}, {35 * time.Second, 100}})
		at := func(i int) time.Duration { return time.Duration(i) * 100 * time.Millisecond }
		f.reach90 = -1
		for i, l := range limits {
			if l >= 90 {
				f.reach90 = at(i)
				break
			}
		}
		f.settleMin, f.settleMax = minMax(limits[100:200])
		f.goodput = svc.goodput(10, 20, 100)
		f.halvedWithin = -1
		for i := 349; i >= 200; i-- {
			if l := limits[i]; l < 37 || l > 63 {
				if i < 349 {
					f.halvedWithin = at(i+1) - 20*time.Second
				}
				break
			}
			if i == 200 {
				f.halvedWithin = 0
			}
		}
		f.halvedMin, f.halvedMax = minMax(limits[300:350])
		f.doubledBefore = limits[349]
		f.doubled5s = limits[399]
		f.doubledReach = -1
		for i := 350; i < len(limits); i++ {
			if limits[i] >= 100 {
				f.doubledReach = at(i) - 35*time.Second
				break
			}
		}
		f.doubled10s = limits[449]
		if s := lim.Stats(); s.InFlight != 0 || s.Queued != 0 {
			t.Fatalf("after the run: %+v", s)
		}
	})
	return f
}

func minMax(xs []int) (int, int) {
	lo, hi := math.MaxInt, math.MinInt
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

type simAlgorithm struct {
	name      string
	new       func() limit.Algorithm
	isDefault bool
}

func simAlgorithms() []simAlgorithm {
	return []simAlgorithm{
		{"gradient2", func() limit.Algorithm { a, _ := limit.NewGradient2(limit.Gradient2Options{}); return a }, true},
		{"vegas", func() limit.Algorithm { a, _ := limit.NewVegas(limit.VegasOptions{}); return a }, false},
		{"aimd", func() limit.Algorithm {
			a, _ := limit.NewAIMD(limit.AIMDOptions{Timeout: 110 * time.Millisecond})
			return a
		}, false},
	}
}

// TestAdaptiveSimulation runs every built-in algorithm, from below and from
// above the knee, through the scenario and checks the adaptation
// targets.
func TestAdaptiveSimulation(t *testing.T) {
	for _, a := range simAlgorithms() {
		for _, initial := range []int{20, 250} {
			t.Run(fmt.Sprintf("%s/initial=%d", a.name, initial), func(t *testing.T) {
				t.Parallel()
				f := simAdaptive(t, a.new(), initial)
				t.Logf("%s from %d: %v", a.name, initial, f)
				// Settles within ±25 % of K and stays there, with goodput
				// of at least 90 % of capacity.
				if f.settleMin < 75 || f.settleMax > 125 || f.goodput < 0.9 {
					t.Errorf("not settled near K = 100: %v", f)
				}
				// Follows K down when it halves.
				if f.halvedMin < 37 || f.halvedMax > 63 {
					t.Errorf("did not follow K = 50: %v", f)
				}
				// Rises when K doubles back.
				if float64(f.doubled10s) < 1.3*float64(f.doubledBefore) {
					t.Errorf("did not rise after K doubled: %v", f)
				}
				if a.isDefault {
					// The targets of the default algorithm: 90 % of K within
					// 10 s, within 25 % of a halved K within 5 s.
					if f.reach90 < 0 || f.reach90 > 10*time.Second {
						t.Errorf("reached 90%% of K after %v, want within 10s", f.reach90)
					}
					if f.halvedWithin < 0 || f.halvedWithin > 5*time.Second {
						t.Errorf("within 25%% of the halved K after %v, want within 5s", f.halvedWithin)
					}
					// Back at K within 5 s of it doubling back, so that
					// goodput is at capacity by then (the lab's step
					// scenario; Smoothing 0.2 left it at 95 here after 5 s
					// and far lower on loopback). Reached, not read at
					// 5 s exactly: at K the limit probes a permit up and
					// down, so the value at one instant is 96 to 107.
					if f.doubledReach < 0 || f.doubledReach > 5*time.Second {
						t.Errorf("limit reached K = 100 %v after it doubled back, want within 5s: %v", f.doubledReach, f)
					}
				}
			})
		}
	}
}

// simLoad offers rate executions per second of next, open loop, for d.
func simLoad(lim Strategy, rate int, d time.Duration, next Next, each func(el time.Duration)) {
	var wg sync.WaitGroup
	ctx := context.Background()
	const tick = 10 * time.Millisecond
	perTick := float64(rate) * tick.Seconds()
	owed := 0.0
	for el := time.Duration(0); el < d; el += tick {
		if each != nil {
			each(el)
		}
		owed += perTick
		for ; owed >= 1; owed-- {
			wg.Go(func() { _ = lim.Execute(ctx, Telemetry{}, next) })
		}
		time.Sleep(tick)
	}
	wg.Wait()
}

// Netflix concurrency-limits #137: steady timeouts must bring the limit
// down (to MinLimit), not let it grow to the maximum because their latency
// is never sampled.
func TestAdaptiveSteadyTimeoutsLowerTheLimit(t *testing.T) {
	for _, a := range simAlgorithms() {
		t.Run(a.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{Algorithm: a.new(), InitialLimit: 100, MinLimit: 5, IgnoreCPUWait: true})
				if err != nil {
					t.Fatal(err)
				}
				timeout := newTimeout(TimeoutOptions{Timeout: 50 * time.Millisecond})
				next := func(ctx context.Context) error {
					return timeout.Execute(ctx, Telemetry{}, func(ctx context.Context) error {
						<-ctx.Done() // the dependency never answers in time
						return ctx.Err()
					})
				}
				simLoad(lim, 500, 10*time.Second, next, nil)
				if got := lim.Stats().Limit; got != 5 {
					t.Fatalf("limit after 10 s of timeouts = %d, want MinLimit 5", got)
				}
			})
		})
	}
}

// Netflix concurrency-limits #146: executions whose caller went away are
// not overload; however slow they were, the limit does not move.
func TestAdaptiveClientCancellationsAreIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{InitialLimit: 50, IgnoreCPUWait: true})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 2000 {
			ctx, cancel := context.WithCancel(context.Background())
			wg.Go(func() {
				_ = lim.Execute(ctx, Telemetry{}, func(ctx context.Context) error {
					<-ctx.Done()
					return ctx.Err()
				})
			})
			time.AfterFunc(2*time.Second, cancel) // the client gives up
			time.Sleep(5 * time.Millisecond)
		}
		wg.Wait()
		if got := lim.Stats().Limit; got != 50 {
			t.Fatalf("limit after cancellations = %d, want 50 unchanged", got)
		}
	})
}

// failsafe-go #127: during a long incident (two minutes of overload at 1.5
// times capacity) the baseline must not drift up until overload looks
// normal; the limit stays where it settled.
func TestAdaptiveBaselineDoesNotDriftInLongIncident(t *testing.T) {
	for _, a := range simAlgorithms() {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				lim, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{Algorithm: a.new(), IgnoreCPUWait: true})
				if err != nil {
					t.Fatal(err)
				}
				svc := &simService{base: 100 * time.Millisecond, knee: 100}
				start := time.Now()
				var limits []int
				simLoad(lim, 1500, 120*time.Second, func(context.Context) error { svc.call(start); return nil },
					func(el time.Duration) {
						if el%time.Second == 0 {
							limits = append(limits, lim.Stats().Limit)
						}
					})
				_, early := minMax(limits[10:30])
				_, late := minMax(limits[90:])
				t.Logf("%s: highest limit at 10-30 s %d, at 90-120 s %d", a.name, early, late)
				if late > 125 || late > early+10 {
					t.Fatalf("limit drifted up during the incident: %d at first, %d at the end", early, late)
				}
			})
		})
	}
}

// MinLimit keeps the service admitting work while a dependency makes every
// execution slow (latency the limit cannot fix), and the limit recovers
// once the dependency does.
func TestAdaptiveMinLimitWhileDependencySlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{MinLimit: 10, IgnoreCPUWait: true})
		if err != nil {
			t.Fatal(err)
		}
		svc := &simService{base: 100 * time.Millisecond, knee: 100}
		start := time.Now()
		var slowLimits []int
		var recovered int
		simLoad(lim, 1500, 55*time.Second, func(context.Context) error { svc.call(start); return nil },
			func(el time.Duration) {
				switch {
				case el == 10*time.Second:
					svc.mu.Lock()
					svc.base = time.Second // the dependency slows down tenfold
					svc.mu.Unlock()
				case el == 35*time.Second:
					svc.mu.Lock()
					svc.base = 100 * time.Millisecond
					svc.mu.Unlock()
				case el > 10*time.Second && el < 35*time.Second:
					slowLimits = append(slowLimits, lim.Stats().Limit)
				case el == 54*time.Second:
					recovered = lim.Stats().Limit
				}
			})
		lo, _ := minMax(slowLimits)
		t.Logf("limit while the dependency was slow: lowest %d; 19 s after it recovered: %d", lo, recovered)
		if lo < 10 {
			t.Fatalf("limit fell to %d, below MinLimit 10", lo)
		}
		if recovered < 90 {
			t.Fatalf("limit %d after the dependency recovered, want back near K = 100", recovered)
		}
	})
}

// windowRecorder wraps an algorithm and records each window's summary.
type windowRecorder struct {
	limit.Algorithm
	mu      sync.Mutex
	windows []limit.Sample
}

func (r *windowRecorder) Update(s limit.Sample) float64 {
	r.mu.Lock()
	r.windows = append(r.windows, s)
	r.mu.Unlock()
	return r.Algorithm.Update(s)
}

// At high throughput the limiter times only some executions (every one
// until a window has started denseTimed timed ones, then one in
// sparseEvery); the limit must still find the knee, settle, and follow it
// down. K = 400 puts about 400 executions in each window (a window is
// about one round-trip time), so most of them go untimed.
func TestAdaptiveSimulationSampledTimingAtHighThroughput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := limit.NewGradient2(limit.Gradient2Options{})
		rec := &windowRecorder{Algorithm: g}
		lim, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{Algorithm: rec, IgnoreCPUWait: true})
		if err != nil {
			t.Fatal(err)
		}
		svc := &simService{base: 100 * time.Millisecond, knee: 400}
		limits := simRun(lim, lim.Stats, svc, 6000, 20*time.Second,
			[]simPhase{{0, 400}, {12 * time.Second, 200}})
		settledLo, settledHi := minMax(limits[60:120])
		halvedLo, halvedHi := minMax(limits[170:200])
		goodput := svc.goodput(6, 12, 400)
		rec.mu.Lock()
		var big, total int
		for _, w := range rec.windows[len(rec.windows)/4:] {
			total++
			if w.Samples >= 3*denseTimed {
				big++
			}
		}
		rec.mu.Unlock()
		t.Logf("settled limit %d..%d (K=400), goodput %.1f%%; after K 400→200: %d..%d; %d of %d windows with ≥ %d samples",
			settledLo, settledHi, 100*goodput, halvedLo, halvedHi, big, total, 3*denseTimed)
		// The scenario must really be in the sampled regime.
		if big < total/2 {
			t.Fatalf("only %d of %d windows held ≥ %d executions: not a high-throughput run", big, total, 3*denseTimed)
		}
		if settledLo < 300 || settledHi > 500 || goodput < 0.9 {
			t.Errorf("not settled near K = 400: limit %d..%d, goodput %.1f%%", settledLo, settledHi, 100*goodput)
		}
		if halvedLo < 150 || halvedHi > 250 {
			t.Errorf("did not follow K = 200: limit %d..%d", halvedLo, halvedHi)
		}
		if s := lim.Stats(); s.InFlight != 0 || s.Queued != 0 {
			t.Fatalf("after the run: %+v", s)
		}
	})
}

// slotService is the overload lab's service in synthetic time: a pool of
// slots, each held for exactly the service time, granted in arrival order.
// Unlike simService, an execution admitted beyond the knee is not slowed
// with the others but waits for a slot, and slots free in the clumps in
// which they were taken, so it waits up to most of a service time.
type slotService struct {
	hold    time.Duration
	mu      sync.Mutex
	size    int
	busy    int
	waiters []chan struct{}
}

func (p *slotService) call() {
	p.mu.Lock()
	if p.busy < p.size && len(p.waiters) == 0 {
		p.busy++
		p.mu.Unlock()
	} else {
		ch := make(chan struct{})
		p.waiters = append(p.waiters, ch)
		p.mu.Unlock()
		<-ch
	}
	time.Sleep(p.hold)
	p.mu.Lock()
	p.busy--
	p.grantLocked()
	p.mu.Unlock()
}

func (p *slotService) grantLocked() {
	for p.busy < p.size && len(p.waiters) > 0 {
		close(p.waiters[0])
		p.waiters = p.waiters[1:]
		p.busy++
	}
}

func (p *slotService) resize(n int) {
	p.mu.Lock()
	p.size = n
	p.grantLocked()
	p.mu.Unlock()
}

// Invariant: no standing queue inside the service once the limit has
// settled. The lab's step scenario in synthetic time (100 slots × 200 ms,
// 50 from 10 s, 100 from 20 s, 600 executions/s offered, evenly): in the
// 5 s after each step has had 5 s, the default limiter gets at least 95 %
// of the new capacity through with an admitted p99 of at most 1.3 × the
// service time. Gradient2's proportional correction alone settled at
// Tolerance × knee + QueueSize (57 permits for 50 slots), and the 7
// executions beyond the slots waited for the next clump of slots to free:
// p99 1.6 × the service time at half capacity.
func TestAdaptiveStepDownLeavesNoStandingQueue(t *testing.T) {
	const (
		hold = 200 * time.Millisecond
		rate = 600
		run  = 30 * time.Second
	)
	synctest.Test(t, func(t *testing.T) {
		lim, err := NewAdaptiveLimiter(AdaptiveLimiterOptions{IgnoreCPUWait: true})
		if err != nil {
			t.Fatal(err)
		}
		svc := &slotService{hold: hold, size: 100}
		type result struct{ end, latency time.Duration }
		var (
			mu      sync.Mutex
			results []result
			wg      sync.WaitGroup
		)
		start := time.Now()
		next := func(context.Context) error { svc.call(); return nil }
		for i := range int(run.Seconds() * rate) {
			at := time.Duration(i) * time.Second / rate
			time.Sleep(time.Until(start.Add(at)))
			switch at {
			case 10 * time.Second:
				svc.resize(50)
			case 20 * time.Second:
				svc.resize(100)
			}
			wg.Go(func() {
				begin := time.Now()
				if lim.Execute(context.Background(), Telemetry{}, next) != nil {
					return // rejected
				}
				end := time.Now()
				mu.Lock()
				results = append(results, result{end.Sub(start), end.Sub(begin)})
				mu.Unlock()
			})
		}
		wg.Wait()
		for _, w := range []struct {
			from     time.Duration
			capacity float64 // executions per second
		}{{15 * time.Second, 250}, {25 * time.Second, 500}} {
			var lat []time.Duration
			for _, r := range results {
				if r.end >= w.from && r.end < w.from+5*time.Second {
					lat = append(lat, r.latency)
				}
			}
			slices.Sort(lat)
			goodput := float64(len(lat)) / 5 / w.capacity
			p99 := lat[len(lat)*99/100]
			t.Logf("%v–%v: goodput %.1f %% of capacity, admitted p99 %v", w.from, w.from+5*time.Second, 100*goodput, p99)
			if goodput < 0.95 || p99 > hold*13/10 {
				t.Errorf("%v–%v: goodput %.1f %% of capacity, admitted p99 %v; want ≥ 95 %% and ≤ %v",
					w.from, w.from+5*time.Second, 100*goodput, p99, hold*13/10)
			}
		}
	})
}
