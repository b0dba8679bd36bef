package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var discardLog = log.New(io.Discard, "", 0)

// Outcome kinds of one request, as its client saw them.
const (
	kindOK      uint8 = iota + 1 // 200 within the client timeout
	kindShed                     // 503 or 429: refused by the middleware
	kindTimeout                  // no answer within the client timeout
	kindFailed                   // any other status or error (504 included)
)

// record is one attempt of one request.
type record struct {
	end   time.Duration // offset from the start when its outcome was known
	lat   time.Duration
	kind  uint8
	class uint8 // 0 low, 1 high
}

// Run measures every contender in turn under cfg and returns the report.
// progress, when not nil, receives a live progress line (rewritten with
// \r). ctx ends the run early with ctx's error.
func Run(ctx context.Context, cfg Config, contenders []Contender, progress io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(contenders) == 0 {
		return nil, errors.New("no contender to run")
	}
	if cfg.Scenario == ScenarioRetryStorm {
		return runStorm(ctx, cfg, contenders, progress)
	}
	rep := &Report{Config: cfg, Machine: machine()}
	if cfg.PinCPUs {
		split, unpin, err := pinGenerator()
		if err != nil {
			rep.Pinning = "not pinned: " + err.Error()
		} else {
			defer unpin()
			cfg.serviceCPUs = split.service
			rep.Pinning = split.String()
		}
	}
	var rounds int
	for i, c := range contenders {
		if i > 0 {
			// Let the previous run's connections and goroutines go.
			select {
			case <-ctx.Done():
				return rep, ctx.Err()
			case <-time.After(time.Second):
			}
		}
		var (
			t   *target
			err error
		)
		switch cfg.Service {
		case ServiceSlots:
			rep.Capacity = cfg.slotCapacity(cfg.Slots)
			k := cfg.Knobs
			if k.Rate == 0 {
				k.Rate = rep.Capacity
			}
			t, err = startSlots(&cfg, c, k)
		case ServiceCPU:
			t, err = startCPU(&cfg, rep, c, &rounds)
		}
		if err != nil {
			return rep, fmt.Errorf("%s: %w", c.Name, err)
		}
		res, err := runOne(ctx, &cfg, rep.Capacity, c.Name, t, progress)
		t.close()
		if err != nil {
			return rep, fmt.Errorf("%s: %w", c.Name, err)
		}
		rep.Results = append(rep.Results, *res)
	}
	return rep, nil
}

// startCPU starts the child for contender c. The first child calibrates
// the work; the later ones reuse its rounds so that every contender serves
// the same work.
func startCPU(cfg *Config, rep *Report, c Contender, rounds *int) (*target, error) {
	k := cfg.Knobs
	if *rounds == 0 {
		// Calibrate in a child of its own, without any middleware. The
		// capacity is known only now; the rate and a rate limiter's rate
		// follow it.
		cal, err := startChild(childSpec{Contender: PassThrough.Name, Knobs: k, Service: ServiceCPU, CPUWork: cfg.CPUWork, Procs: cfg.ServiceProcs, CPUs: cfg.serviceCPUs})
		if err != nil {
			return nil, err
		}
		cal.stop()
		*rounds, rep.Capacity, rep.CPURounds = cal.hello.Rounds, cal.hello.Capacity, cal.hello.Rounds
		rep.ServiceProcs = cal.hello.Procs
		if cfg.RateFactor > 0 {
			cfg.Rate = math.Round(cfg.RateFactor * rep.Capacity)
		}
		rep.Config.Rate = cfg.Rate
	}
	if k.Rate == 0 {
		k.Rate = rep.Capacity
	}
	ch, err := startChild(childSpec{Contender: c.Name, Knobs: k, Service: ServiceCPU, CPUWork: cfg.CPUWork, Rounds: *rounds, Procs: cfg.ServiceProcs, CPUs: cfg.serviceCPUs})
	if err != nil {
		return nil, err
	}
	client := &http.Client{}
	return &target{
		base:  ch.hello.Addr,
		stats: func() (serviceStats, error) { return fetchStats(client, ch.hello.Addr) },
		close: ch.stop,
	}, nil
}

// arrivals returns the offsets at which requests are sent.
func arrivals(cfg *Config) []time.Duration {
	n := int(cfg.Rate * cfg.Duration.Seconds())
	out := make([]time.Duration, 0, n)
	gap := float64(time.Second) / cfg.Rate
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6c6162))
	t := 0.0
	for {
		if cfg.Arrivals == ArrivalsPoisson {
			t += rng.ExpFloat64() * gap
		} else {
			t = float64(len(out)) * gap // no accumulated rounding: exactly rate × duration
		}
		if t >= float64(cfg.Duration) {
			return out
		}
		out = append(out, time.Duration(t))
	}
}

// classes returns, per arrival, 1 for the high class: a seeded shuffle
// with exactly the configured share.
func classes(cfg *Config, n int) []uint8 {
	out := make([]uint8, n)
	high := int(math.Round(cfg.High * float64(n)))
	for i := range high {
		out[i] = 1
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x636c61))
	rng.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// runOne sends the scenario's traffic to t and summarises it.
func runOne(ctx context.Context, cfg *Config, capacity float64, name string, t *target, progress io.Writer) (*Result, error) {
	arr := arrivals(cfg)
	cls := classes(cfg, len(arr))
	if len(cfg.Tenants) > 0 {
		arr, cls = tenantArrivals(cfg)
	}
	recs := make([]record, 2*len(arr)) // attempt 0 and the retry
	lags := make([]time.Duration, len(arr))

	tr := &http.Transport{
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	url := t.base + workPath

	var sent, ok, shed, timedOut atomic.Int64
	// send sends one request of class and returns its record and, for a
	// rejection, its Retry-After.
	send := func(start time.Time, class uint8) (record, time.Duration) {
		rctx, cancel := context.WithTimeout(ctx, cfg.ClientTimeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
		if cfg.High > 0 {
			p := LowPriority
			if class == 1 {
				p = HighPriority
			}
			req.Header.Set(PriorityHeader, fmt.Sprint(p))
		}
		if len(cfg.Tenants) > 0 {
			req.Header.Set(TenantHeader, cfg.Tenants[class].Name)
		}
		sent.Add(1)
		t0 := time.Now()
		resp, err := client.Do(req)
		status := 0
		var wait time.Duration
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
		}
		now := time.Now()
		r := record{end: now.Sub(start), lat: now.Sub(t0), class: class}
		switch {
		case err != nil && rctx.Err() != nil && ctx.Err() == nil:
			r.kind = kindTimeout
			timedOut.Add(1)
		case err != nil:
			r.kind = kindFailed
		case status == http.StatusOK:
			r.kind = kindOK
			ok.Add(1)
		case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
			r.kind = kindShed
			shed.Add(1)
			wait = retryAfter(resp)
		default:
			r.kind = kindFailed
		}
		return r, wait
	}
	do := func(start time.Time, i, attempt int) {
		recs[2*i+attempt], _ = send(start, cls[i])
	}

	for _, s := range cfg.Steps {
		if t.setSlots != nil {
			tm := time.AfterFunc(s.At, func() { t.setSlots(s.Slots) })
			defer tm.Stop()
		}
	}

	start := time.Now()
	stopProgress := make(chan struct{})
	var progressDone sync.WaitGroup
	if progress != nil {
		progressDone.Go(func() {
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			line := func() {
				fmt.Fprintf(progress, "\r%-16s %5.1fs  sent %6d  ok %6d  shed %6d  timed out %6d ",
					name, time.Since(start).Seconds(), sent.Load(), ok.Load(), shed.Load(), timedOut.Load())
			}
			for {
				select {
				case <-tick.C:
					line()
				case <-stopProgress:
					line()
					fmt.Fprintln(progress)
					return
				}
			}
		})
	}

	var wg sync.WaitGroup
	var cpuStart = processCPU()
	if cfg.ClosedLoop() {
		recs, lags, arr = runClosed(ctx, cfg, start, send), nil, nil
	}
	for i, at := range arr {
		if d := time.Until(start.Add(at)); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		lags[i] = time.Since(start.Add(at))
		wg.Go(func() {
			do(start, i, 0)
			if cfg.RetryOnce && recs[2*i].kind == kindTimeout {
				do(start, i, 1)
			}
		})
	}
	wg.Wait()
	genCPU := processCPU() - cpuStart
	close(stopProgress)
	progressDone.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := summarise(cfg, capacity, name, recs, lags)
	res.Wasted, res.Pending = -1, -1 // unknown unless the service answers
	if st, err := t.stats(); err == nil {
		res.Wasted, res.Pending = st.Wasted, st.Pending
	}
	res.ProcessCPU = genCPU.Seconds()
	res.Load = loadAvg()
	return res, nil
}

// processCPU is the CPU time this process has used so far (user+system),
// or 0 where it cannot be read.
func processCPU() time.Duration { return cpuTime() }

// machine describes where the lab runs.
func machine() Machine {
	host, _ := os.Hostname()
	m := Machine{
		Date:      time.Now().UTC().Format(time.RFC3339),
		GoVersion: runtime.Version(),
		OS:        runtime.GOOS + "/" + runtime.GOARCH,
		CPUs:      runtime.NumCPU(),
		Host:      host,
		Load:      loadAvg(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// loadAvg is the 1, 5 and 15 minute load averages, or "" where unknown.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// percentile returns the p-quantile (0 < p <= 1) of sorted d, 0 if empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }
