package lab

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/budget"
	"github.com/ylcnfrht/resilience/core/outbound"
	"github.com/ylcnfrht/resilience/core/throttle"
)

// ScenarioRetryStorm is the retry-storm scenario: the offered load is
// 1.6 × capacity for the first half of the run and 0.8 × for the second,
// and every client retries a 503, a 5xx or a timeout up to three times.
// Its modes pair a server contender with a client behaviour (StormModes).
const ScenarioRetryStorm = "retry-storm"

// The client behaviours of the retry-storm scenario.
const (
	// ClientNaive retries in a loop of its own, as users write it: up to
	// three more attempts, 100 ms apart, unmarked.
	ClientNaive = "naive"
	// ClientBudget retries the same way through outbound.Transport with a
	// budget.Budget (the defaults): retries are marked and
	// capped at a tenth of the first attempts.
	ClientBudget = "budget"
	// ClientThrottle retries through outbound.Transport with an
	// AdaptiveThrottle (the defaults) inside the retry and no budget.
	ClientThrottle = "throttle"
	// ClientBudgetThrottle has both.
	ClientBudgetThrottle = "budget-throttle"
)

// stormClients are the behaviours, longest name first for splitStormMode.
var stormClients = []string{ClientBudgetThrottle, ClientNaive, ClientBudget, ClientThrottle}

// stormServers are the server contenders the scenario pairs them with:
// no shedding, the fixed limiter, and the fixed limiter that ranks marked
// retries below first attempts (by.RetriesLast).
var stormServers = []string{"none", "fixed", "fixed-retrylast"}

const (
	stormRetries    = 3
	stormRetryDelay = 100 * time.Millisecond
	// stormAfter is the load after the drop, as a share of the load before.
	stormAfter = 0.5
	// stormBucket is the resolution of the recovery time.
	stormBucket = 250 * time.Millisecond
	// stormRecovered is the share of logical requests that must succeed
	// in every bucket from the recovery on.
	stormRecovered = 0.95
)

// StormModes returns the retry-storm scenario's modes, named
// SERVER-CLIENT: every server contender (none, fixed, fixed-retrylast)
// with every client behaviour (naive, budget, throttle, budget-throttle).
func StormModes() []Contender {
	ours := Ours()
	var out []Contender
	for _, s := range stormServers {
		for _, c := range ours {
			if c.Name != s {
				continue
			}
			for _, cl := range []string{ClientNaive, ClientBudget, ClientThrottle, ClientBudgetThrottle} {
				out = append(out, Contender{Name: s + "-" + cl, New: c.New})
			}
		}
	}
	return out
}

// Modes returns the modes a scenario can run: StormModes for the
// retry-storm scenario, Ours for the others.
func Modes(scenario string) []Contender {
	if scenario == ScenarioRetryStorm {
		return StormModes()
	}
	return Ours()
}

// splitStormMode returns the server contender and the client behaviour of
// a storm mode's name.
func splitStormMode(name string) (server, client string, ok bool) {
	for _, cl := range stormClients {
		if s, found := strings.CutSuffix(name, "-"+cl); found {
			return s, cl, true
		}
	}
	return "", "", false
}

// stormPreset is the retry-storm scenario's configuration: the overload
// scenario's service and knobs, 1.6 × capacity for 20 s, then 0.8 × for
// 20 s.
func stormPreset(c *Config) {
	c.Rate, c.Duration = 800, 40*time.Second
}

// StormFigures are the retry-storm scenario's figures of one mode. The
// overload phase is the first half of the run, "after" the second; a
// logical request is one call of the application, made of one or more
// attempts, and belongs to the phase it started in.
type StormFigures struct {
	Client string `json:"client"`
	// Logical is the number of logical requests.
	Logical int `json:"logical"`
	// Amplification is attempts sent per logical request of the overload
	// phase (attempts refused locally by a throttle are not sent);
	// AmplificationAfter the same after the drop.
	Amplification      float64 `json:"amplification"`
	AmplificationAfter float64 `json:"amplificationAfter"`
	// GoodputOverload and GoodputAfter are the successful attempts per
	// second that ended in each phase.
	GoodputOverload float64 `json:"goodputOverload"`
	GoodputAfter    float64 `json:"goodputAfter"`
	// LogicalShare is the share of logical requests that succeeded (over
	// the run); LogicalShareOverload that of the overload phase.
	LogicalShare         float64 `json:"logicalShare"`
	LogicalShareOverload float64 `json:"logicalShareOverload"`
	// FirstAttemptShare and RetryShare are the success shares of the
	// first attempts and of the retries sent during the overload phase
	// (0 when none were sent).
	FirstAttemptShare float64 `json:"firstAttemptShare"`
	RetryShare        float64 `json:"retryShare"`
	RetriesOverload   int     `json:"retriesOverload"`
	// RecoverySeconds is the time from the drop to the start of the first
	// 250 ms bucket from which, to the end of the run, at least 95 % of
	// the logical requests started in every bucket succeeded; -1 if that
	// never happened.
	RecoverySeconds float64 `json:"recoverySeconds"`
	// Throttled counts attempts refused locally by the throttle and
	// BudgetDenied retries the budget denied.
	Throttled    uint64 `json:"throttled"`
	BudgetDenied uint64 `json:"budgetDenied"`
}

// stormArrivals returns the offsets of the logical requests: cfg.Rate
// until the drop at half the run, stormAfter × cfg.Rate after.
func stormArrivals(cfg *Config) []time.Duration {
	drop := cfg.Duration / 2
	var out []time.Duration
	gap := float64(time.Second) / cfg.Rate
	for i := 0; ; i++ {
		t := time.Duration(float64(i) * gap)
		if t >= drop {
			break
		}
		out = append(out, t)
	}
	gap /= stormAfter
	for i := 0; ; i++ {
		t := drop + time.Duration(float64(i)*gap)
		if t >= cfg.Duration {
			return out
		}
		out = append(out, t)
	}
}

// runStorm measures every storm mode in turn.
func runStorm(ctx context.Context, cfg Config, modes []Contender, progress io.Writer) (*Report, error) {
	if cfg.Service != ServiceSlots {
		return nil, fmt.Errorf("the %s scenario needs the slots service", ScenarioRetryStorm)
	}
	rep := &Report{Config: cfg, Machine: machine(), Capacity: cfg.slotCapacity(cfg.Slots)}
	for i, m := range modes {
		server, client, ok := splitStormMode(m.Name)
		if !ok {
			return rep, fmt.Errorf("mode %q names no client behaviour (%s)", m.Name, strings.Join(stormClients, ", "))
		}
		if i > 0 {
			select {
			case <-ctx.Done():
				return rep, ctx.Err()
			case <-time.After(time.Second):
			}
		}
		k := cfg.Knobs
		if k.Rate == 0 {
			k.Rate = rep.Capacity
		}
		t, err := startSlots(&cfg, Contender{Name: server}, k)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", m.Name, err)
		}
		res, err := stormOne(ctx, &cfg, m.Name, client, t, progress)
		t.close()
		if err != nil {
			return rep, fmt.Errorf("%s: %w", m.Name, err)
		}
		rep.Results = append(rep.Results, *res)
	}
	return rep, nil
}

// stormAttempt is one attempt on the wire.
type stormAttempt struct {
	end, lat time.Duration
	kind     uint8
}

// stormCallKey carries a logical request's index (and, for the naive
// loop, the attempt's number) to the recording transport.
type stormCallKey struct{}

type stormCall struct {
	i, n int
}

// recorder is the base transport of every client: it records each
// attempt that goes on the wire in its logical request's row.
type stormRecorder struct {
	base     http.RoundTripper
	start    time.Time
	recs     []stormAttempt // (stormRetries+1) per logical request
	sent, ok atomic.Int64
	shed, to atomic.Int64
}

func (s *stormRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	c, _ := r.Context().Value(stormCallKey{}).(stormCall)
	n := c.n
	if v := r.Header.Get(outbound.AttemptHeader); v != "" {
		n, _ = strconv.Atoi(v)
	}
	s.sent.Add(1)
	t0 := time.Now()
	resp, err := s.base.RoundTrip(r)
	var kind uint8
	status := 0
	if err == nil {
		// Read the body here, so that the attempt's end is its answer's.
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		resp.Body = http.NoBody
		status = resp.StatusCode
	}
	now := time.Now()
	switch {
	case err != nil && r.Context().Err() != nil:
		kind = kindTimeout
		s.to.Add(1)
	case err != nil:
		kind = kindFailed
	case status == http.StatusOK:
		kind = kindOK
		s.ok.Add(1)
	case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		kind = kindShed
		s.shed.Add(1)
	default:
		kind = kindFailed
	}
	if idx := c.i*(stormRetries+1) + n; n >= 0 && n <= stormRetries && idx < len(s.recs) {
		s.recs[idx] = stormAttempt{end: now.Sub(s.start), lat: now.Sub(t0), kind: kind}
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// retried reports whether a naive client retries an attempt's outcome:
// a timeout, a transport error, a 429 or a 5xx.
func retried(resp *http.Response, err error) bool {
	return err != nil || outbound.HandledStatus(resp.StatusCode)
}

// stormClient returns what one logical request does, and the budget and
// throttle it uses (nil when the behaviour has none).
func stormClient(cfg *Config, client string, rec *stormRecorder) (func(ctx context.Context, url string) bool, *budget.Budget, *throttle.Throttle[*http.Response], error) {
	if client == ClientNaive {
		hc := &http.Client{Transport: rec}
		return func(ctx context.Context, url string) bool {
			c, _ := ctx.Value(stormCallKey{}).(stormCall)
			for n := 0; n <= stormRetries; n++ {
				c.n = n
				actx, cancel := context.WithTimeout(context.WithValue(ctx, stormCallKey{}, c), cfg.ClientTimeout)
				req, _ := http.NewRequestWithContext(actx, http.MethodGet, url, nil)
				resp, err := hc.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				cancel()
				if !retried(resp, err) {
					return err == nil && resp.StatusCode == http.StatusOK
				}
				if n < stormRetries {
					select {
					case <-time.After(stormRetryDelay):
					case <-ctx.Done():
						return false
					}
				}
			}
			return false
		}, nil, nil, nil
	}
	var (
		bu  *budget.Budget
		th  *throttle.Throttle[*http.Response]
		err error
	)
	ro := outbound.RetryOptions()
	ro.MaxRetryAttempts, ro.Delay = stormRetries, stormRetryDelay
	ro.BackoffType, ro.UseJitter, ro.DelayGenerator = resilience.BackoffConstant, false, nil
	if client == ClientBudget || client == ClientBudgetThrottle {
		if bu, err = budget.New(budget.Options{}); err != nil {
			return nil, nil, nil, err
		}
		ro.Budget = bu
	}
	b := resilience.NewBuilder[*http.Response](resilience.WithName("storm")).AddRetry(ro)
	if client == ClientThrottle || client == ClientBudgetThrottle {
		if th, err = throttle.New(outbound.ThrottleOptions()); err != nil {
			return nil, nil, nil, err
		}
		b.AddResultStrategy(th)
	}
	p, err := b.Build()
	if err != nil {
		return nil, nil, nil, err
	}
	tr, err := outbound.New(outbound.Options{Base: rec, Pipeline: p, AttemptTimeout: cfg.ClientTimeout})
	if err != nil {
		return nil, nil, nil, err
	}
	hc := &http.Client{Transport: tr}
	return func(ctx context.Context, url string) bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, bu, th, nil
}

// stormOne sends the scenario's logical requests to t with one client
// behaviour and summarises them.
func stormOne(ctx context.Context, cfg *Config, name, client string, t *target, progress io.Writer) (*Result, error) {
	arr := stormArrivals(cfg)
	tr := &http.Transport{MaxIdleConns: 0, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	defer tr.CloseIdleConnections()
	rec := &stormRecorder{base: tr, recs: make([]stormAttempt, len(arr)*(stormRetries+1))}
	call, bu, th, err := stormClient(cfg, client, rec)
	if err != nil {
		return nil, err
	}
	url := t.base + workPath
	ok := make([]bool, len(arr))
	lags := make([]time.Duration, len(arr))

	start := time.Now()
	rec.start = start
	stopProgress := make(chan struct{})
	var progressDone sync.WaitGroup
	if progress != nil {
		progressDone.Go(func() {
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			line := func() {
				fmt.Fprintf(progress, "\r%-28s %5.1fs  sent %6d  ok %6d  shed %6d  timed out %6d ",
					name, time.Since(start).Seconds(), rec.sent.Load(), rec.ok.Load(), rec.shed.Load(), rec.to.Load())
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
	cpuStart := processCPU()
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
			ok[i] = call(context.WithValue(ctx, stormCallKey{}, stormCall{i: i}), url)
		})
	}
	wg.Wait()
	genCPU := processCPU() - cpuStart
	close(stopProgress)
	progressDone.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := summariseStorm(cfg, name, client, arr, rec.recs, ok, lags)
	if bu != nil {
		res.BudgetDenied = bu.Stats().Denied
	}
	if th != nil {
		res.Throttled = th.Stats().Throttled
	}
	res.Wasted, res.Pending = -1, -1
	if st, err := t.stats(); err == nil {
		res.Wasted, res.Pending = st.Wasted, st.Pending
	}
	res.ProcessCPU = genCPU.Seconds()
	res.Load = loadAvg()
	return res, nil
}

// share is n/of, 0 when of is 0.
func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func summariseStorm(cfg *Config, name, client string, arr []time.Duration, recs []stormAttempt, ok []bool, lags []time.Duration) *Result {
	drop := cfg.Duration / 2
	r := &Result{Contender: name}
	f := &StormFigures{Client: client, Logical: len(arr), RecoverySeconds: -1}
	r.StormFigures = f
	var okLat, shedLat []time.Duration
	var last10 int
	from10 := max(cfg.Duration-10*time.Second, 0)
	nb := int(math.Ceil(float64(cfg.Duration+cfg.ClientTimeout*(stormRetries+1)) / float64(cfg.Series)))
	buckets := make([][]time.Duration, nb)
	shedPer := make([]int, nb)
	var phaseLogical, phaseAttempts, phaseOK [2]int
	var firstSent, firstOK, retrySent, retryOK int
	var okBefore, okAfter int
	for i, at := range arr {
		ph := 0
		if at >= drop {
			ph = 1
		}
		phaseLogical[ph]++
		if ok[i] {
			phaseOK[ph]++
		}
		for n := 0; n <= stormRetries; n++ {
			a := recs[i*(stormRetries+1)+n]
			if a.kind == 0 {
				continue
			}
			r.Sent++
			phaseAttempts[ph]++
			if n > 0 {
				r.Retries++
			}
			if ph == 0 {
				if n == 0 {
					firstSent++
				} else {
					retrySent++
				}
			}
			switch a.kind {
			case kindOK:
				r.OK++
				okLat = append(okLat, a.lat)
				if ph == 0 && n == 0 {
					firstOK++
				} else if ph == 0 {
					retryOK++
				}
				if a.end < drop {
					okBefore++
				} else if a.end < cfg.Duration {
					okAfter++
				}
				if a.end >= from10 && a.end < cfg.Duration {
					last10++
				}
				if b := int(a.end / cfg.Series); b < nb {
					buckets[b] = append(buckets[b], a.lat)
				}
			case kindShed:
				r.Shed++
				shedLat = append(shedLat, a.lat)
				if b := int(a.end / cfg.Series); b < nb {
					shedPer[b]++
				}
			case kindTimeout:
				r.Timeouts++
			default:
				r.Failed++
			}
		}
	}
	f.Amplification = round3(share(phaseAttempts[0], phaseLogical[0]))
	f.AmplificationAfter = round3(share(phaseAttempts[1], phaseLogical[1]))
	f.GoodputOverload = round1(float64(okBefore) / drop.Seconds())
	f.GoodputAfter = round1(float64(okAfter) / (cfg.Duration - drop).Seconds())
	f.LogicalShare = round3(share(phaseOK[0]+phaseOK[1], len(arr)))
	f.LogicalShareOverload = round3(share(phaseOK[0], phaseLogical[0]))
	f.FirstAttemptShare = round3(share(firstOK, firstSent))
	f.RetryShare = round3(share(retryOK, retrySent))
	f.RetriesOverload = retrySent
	f.RecoverySeconds = recovery(arr, ok, drop, cfg.Duration)

	sortDurations(okLat)
	sortDurations(shedLat)
	sortDurations(lags)
	r.Goodput = round1(float64(r.OK) / cfg.Duration.Seconds())
	r.GoodputLast10 = round1(float64(last10) / (cfg.Duration - from10).Seconds())
	r.P50, r.P99 = ms(percentile(okLat, 0.5)), ms(percentile(okLat, 0.99))
	r.ShedP99 = ms(percentile(shedLat, 0.99))
	r.LagP99, r.LagMax = ms(percentile(lags, 0.99)), ms(percentile(lags, 1))
	for b, lat := range buckets {
		sortDurations(lat)
		end := time.Duration(b+1) * cfg.Series
		r.Series = append(r.Series, Point{
			T:       end.Seconds(),
			Goodput: round1(float64(len(lat)) / cfg.Series.Seconds()),
			Shed:    round1(float64(shedPer[b]) / cfg.Series.Seconds()),
			P99:     ms(percentile(lat, 0.99)),
			Partial: end > cfg.Duration,
		})
	}
	return r
}

// recovery is the time from drop to the start of the first stormBucket
// from which every bucket to end has at least stormRecovered of its
// logical requests succeeding, or -1.
func recovery(arr []time.Duration, ok []bool, drop, end time.Duration) float64 {
	n := int((end - drop + stormBucket - 1) / stormBucket)
	sent, good := make([]int, n), make([]int, n)
	for i, at := range arr {
		if at < drop {
			continue
		}
		b := min(int((at-drop)/stormBucket), n-1)
		sent[b]++
		if ok[i] {
			good[b]++
		}
	}
	from := -1
	for b := n - 1; b >= 0; b-- {
		if sent[b] > 0 && float64(good[b]) < stormRecovered*float64(sent[b]) {
			break
		}
		from = b
	}
	if from < 0 {
		return -1
	}
	return (time.Duration(from) * stormBucket).Seconds()
}

// writeStormTable writes the retry-storm figures, one row per mode;
// nothing for other scenarios.
func (rep *Report) writeStormTable(w io.Writer) error {
	if rep.Config.Scenario != ScenarioRetryStorm {
		return nil
	}
	fmt.Fprintf(w, "\nretry storm: %.0f req/s for %v, then %.0f req/s for %v; clients retry up to %d times, %v apart:\n",
		rep.Config.Rate, rep.Config.Duration/2, rep.Config.Rate*stormAfter, rep.Config.Duration/2, stormRetries, stormRetryDelay)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tgoodput/s overload\tafter\tamplification overload\tafter\tlogical success\toverload\tfirst-attempt success\tretry success\trecovery s\tthrottled\tbudget denied\t")
	for _, r := range rep.Results {
		f := r.StormFigures
		if f == nil {
			continue
		}
		rec := "never"
		if f.RecoverySeconds >= 0 {
			rec = fmt.Sprintf("%.2f", f.RecoverySeconds)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%.2f\t%.1f %%\t%.1f %%\t%.1f %%\t%.1f %%\t%s\t%d\t%d\t\n",
			r.Contender, f.GoodputOverload, f.GoodputAfter, f.Amplification, f.AmplificationAfter,
			100*f.LogicalShare, 100*f.LogicalShareOverload, 100*f.FirstAttemptShare, 100*f.RetryShare, rec, f.Throttled, f.BudgetDenied)
	}
	return tw.Flush()
}

// writeStormMarkdown is writeStormTable in Markdown.
func (rep *Report) writeStormMarkdown(w io.Writer) {
	if rep.Config.Scenario != ScenarioRetryStorm {
		return
	}
	fmt.Fprintln(w, "\n| mode | goodput/s overload | after | amplification overload | after | logical success | overload | first-attempt success | retry success | recovery s |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rep.Results {
		f := r.StormFigures
		if f == nil {
			continue
		}
		rec := "never"
		if f.RecoverySeconds >= 0 {
			rec = fmt.Sprintf("%.2f", f.RecoverySeconds)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.2f | %.2f | %.1f %% | %.1f %% | %.1f %% | %.1f %% | %s |\n",
			r.Contender, f.GoodputOverload, f.GoodputAfter, f.Amplification, f.AmplificationAfter,
			100*f.LogicalShare, 100*f.LogicalShareOverload, 100*f.FirstAttemptShare, 100*f.RetryShare, rec)
	}
}
