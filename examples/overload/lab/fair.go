package lab

import (
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"text/tabwriter"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TenantHeader names the tenant a request is sent for, in scenarios with
// Config.Tenants. The fair modes key their flows on it.
const TenantHeader = "X-Tenant"

// Tenant is one client population of a scenario: its name, sent in
// TenantHeader, and the rate it offers, or in a closed loop its number of
// workers (0: its share of Config.Workers, by Rate).
type Tenant struct {
	Name    string  `json:"name"`
	Rate    float64 `json:"rate"`
	Workers int     `json:"workers,omitempty"`
}

// fairTenants is the fair scenario's traffic: one tenant offers more than
// the whole capacity, nine offer 44 req/s each (400 in total), below their
// fair share of a tenth each.
func fairTenants() []Tenant {
	ts := []Tenant{{Name: "noisy", Rate: 600}}
	for i := 1; i <= 9; i++ {
		ts = append(ts, Tenant{Name: fmt.Sprintf("quiet-%d", i), Rate: 44})
	}
	return ts
}

// tenantRate is the tenants' total offered rate.
func tenantRate(ts []Tenant) float64 {
	r := 0.0
	for _, t := range ts {
		r += t.Rate
	}
	return r
}

// validateTenants reports the first invalid tenant.
func validateTenants(ts []Tenant) error {
	if len(ts) > math.MaxUint8 {
		return fmt.Errorf("at most %d tenants, got %d", math.MaxUint8, len(ts))
	}
	seen := map[string]bool{}
	for _, t := range ts {
		if t.Name == "" || seen[t.Name] {
			return fmt.Errorf("tenant names must be distinct and not empty, got %q", t.Name)
		}
		seen[t.Name] = true
		if t.Rate <= 0 {
			return fmt.Errorf("tenant %s: rate must be greater than 0", t.Name)
		}
		if t.Workers < 0 {
			return fmt.Errorf("tenant %s: workers must not be negative", t.Name)
		}
	}
	return nil
}

// tenantArrivals merges the tenants' arrival streams, each at its own
// rate (even arrivals start a tenant at a phase of its own, so that the
// streams do not arrive in lockstep), and returns the offsets in order
// with each arrival's tenant index.
func tenantArrivals(cfg *Config) ([]time.Duration, []uint8) {
	type arrival struct {
		at     time.Duration
		tenant uint8
	}
	var all []arrival
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x74656e))
	scale := cfg.tenantScale()
	for i, t := range cfg.Tenants {
		gap := float64(time.Second) / (t.Rate * scale)
		at := rng.Float64() * gap
		for at < float64(cfg.Duration) {
			all = append(all, arrival{time.Duration(at), uint8(i)})
			if cfg.Arrivals == ArrivalsPoisson {
				at += rng.ExpFloat64() * gap
			} else {
				at += gap
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].at < all[j].at })
	arr := make([]time.Duration, len(all))
	cls := make([]uint8, len(all))
	for i, a := range all {
		arr[i], cls[i] = a.at, a.tenant
	}
	return arr, cls
}

// tenantScale is what Rate makes of the tenants' own rates: a Rate
// changed after the preset scales every tenant alike.
func (c *Config) tenantScale() float64 { return c.Rate / tenantRate(c.Tenants) }

// tenantResults is the per-tenant table of a result: requests sent (first
// attempts), answered in time, and the share, in the Classes entries'
// form.
func tenantResults(cfg *Config, recs []record) []ClassResult {
	out := make([]ClassResult, len(cfg.Tenants))
	for i, t := range cfg.Tenants {
		out[i].Class = t.Name
	}
	lat := make([][]time.Duration, len(out))
	for i, rec := range recs {
		if rec.kind == 0 || int(rec.class) >= len(out) {
			continue
		}
		c := &out[rec.class]
		if i%2 == 0 {
			c.Sent++
		}
		if rec.kind == kindOK {
			c.InTime++
			lat[rec.class] = append(lat[rec.class], rec.lat)
		}
	}
	for i := range out {
		sortDurations(lat[i])
		out[i].P99 = ms(percentile(lat[i], 0.99))
		if out[i].Sent > 0 {
			out[i].Share = math.Round(1000*float64(out[i].InTime)/float64(out[i].Sent)) / 1000
		}
	}
	return out
}

// writeTenantTable writes the tenants' shares answered in time, one row
// per mode, one column per tenant, and the worst quiet tenant (every
// tenant but the first).
func (rep *Report) writeTenantTable(w io.Writer) error {
	c := rep.Config
	fmt.Fprintf(w, "\nanswered in time per tenant (%s header; %s in brackets):\n", TenantHeader, c.tenantLoadName())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "mode\t")
	for i, t := range c.Tenants {
		fmt.Fprintf(tw, "%s [%s]\t", t.Name, c.tenantLoad(i))
	}
	fmt.Fprintln(tw, "worst quiet\tnoisy in time/s\tnoisy p99 ms\tquiet p99 ms\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t", r.Contender)
		for _, cr := range r.Classes {
			fmt.Fprintf(tw, "%.1f %%\t", 100*cr.Share)
		}
		noisy, quiet := tenantP99(r.Classes)
		fmt.Fprintf(tw, "%.1f %%\t%.0f\t%.0f\t%.0f\t\n", 100*worstQuiet(r.Classes), noisyGoodput(&c, r.Classes), noisy, quiet)
	}
	return tw.Flush()
}

// writeTenantMarkdown is writeTenantTable in Markdown.
func (rep *Report) writeTenantMarkdown(w io.Writer) {
	c := rep.Config
	fmt.Fprintf(w, "\n| contender |")
	for i, t := range c.Tenants {
		fmt.Fprintf(w, " %s (%s) |", t.Name, c.tenantLoadMarkdown(i))
	}
	fmt.Fprintf(w, " worst quiet | noisy in time/s | noisy p99 ms | quiet p99 ms |\n|---|%s--:|--:|--:|--:|\n", repeat("--:|", len(c.Tenants)))
	for _, r := range rep.Results {
		fmt.Fprintf(w, "| %s |", r.Contender)
		for _, cr := range r.Classes {
			fmt.Fprintf(w, " %.1f %% |", 100*cr.Share)
		}
		noisy, quiet := tenantP99(r.Classes)
		fmt.Fprintf(w, " %.1f %% | %.0f | %.0f | %.0f |\n", 100*worstQuiet(r.Classes), noisyGoodput(&c, r.Classes), noisy, quiet)
	}
}

// tenantLoadName is what the tenant table's brackets hold.
func (c *Config) tenantLoadName() string {
	if c.ClosedLoop() {
		return "closed-loop workers"
	}
	return "offered req/s"
}

// tenantLoad is tenant i's offered rate, or its workers in a closed loop.
func (c *Config) tenantLoad(i int) string {
	if c.ClosedLoop() {
		return fmt.Sprintf("%d", c.tenantWorkers(i))
	}
	return fmt.Sprintf("%.0f", c.Tenants[i].Rate*c.tenantScale())
}

func (c *Config) tenantLoadMarkdown(i int) string {
	if c.ClosedLoop() {
		return fmt.Sprintf("%d workers", c.tenantWorkers(i))
	}
	return fmt.Sprintf("%.0f/s", c.Tenants[i].Rate*c.tenantScale())
}

// tenantWorkers is the number of closed-loop workers of tenant i.
func (c *Config) tenantWorkers(i int) int {
	n := 0
	for _, w := range closedWorkers(c) {
		if int(w.class) == i {
			n++
		}
	}
	return n
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

// worstQuiet is the lowest share in time among the tenants after the
// first (the quiet ones).
func worstQuiet(cs []ClassResult) float64 {
	worst := 1.0
	for _, c := range cs[min(1, len(cs)):] {
		worst = min(worst, c.Share)
	}
	return worst
}

// tenantP99 is the first tenant's p99 answered latency and the highest
// of the others' (ms).
func tenantP99(cs []ClassResult) (noisy, quiet float64) {
	if len(cs) == 0 {
		return 0, 0
	}
	for _, c := range cs[1:] {
		quiet = max(quiet, c.P99)
	}
	return cs[0].P99, quiet
}

// noisyGoodput is the first tenant's requests answered in time per second.
func noisyGoodput(c *Config, cs []ClassResult) float64 {
	if len(cs) == 0 {
		return 0
	}
	return float64(cs[0].InTime) / c.Duration.Seconds()
}

// fairContenders are the modes that share the limiters' permits fairly
// between tenants (keyed on TenantHeader), and the adaptive limiter with a
// queue but without fairness, their contrast:
//
//   - fixed-fair, fixed-codel-fair: fixed and fixed-codel with a flow per
//     tenant;
//   - adaptive-queue: the adaptive limiter with the knobs' queue and queue
//     timeout (FIFO within a priority);
//   - adaptive-fair: the same with a flow per tenant;
//   - adaptive-codel-fair: adaptive-codel with a flow per tenant.
func fairContenders() []Contender {
	flow := by.Header(TenantHeader)
	adaptive := func(k Knobs, codel *resilience.CoDelOptions, fair bool) *resilience.AdaptiveLimiterOptions {
		o := &resilience.AdaptiveLimiterOptions{QueueLimit: k.Queue, QueueTimeout: k.QueueTimeout, Priority: priority(k), CoDel: codel}
		if fair {
			o.Flow = flow
		}
		return o
	}
	fixed := func(k Knobs, codel *resilience.CoDelOptions) *resilience.ConcurrencyLimiterOptions {
		o := fixedOptions(k, codel, "")
		o.Flow = flow
		return o
	}
	return []Contender{
		{Name: "fixed-fair", New: func(k Knobs) (func(http.Handler) http.Handler, error) {
			return inboundMiddleware(k, inbound.Options{Concurrency: fixed(k, nil)})
		}},
		{Name: "fixed-codel-fair", New: func(k Knobs) (func(http.Handler) http.Handler, error) {
			return inboundMiddleware(k, inbound.Options{Concurrency: fixed(k, &resilience.CoDelOptions{})})
		}},
		{Name: "adaptive-queue", New: func(k Knobs) (func(http.Handler) http.Handler, error) {
			return inboundMiddleware(k, inbound.Options{Adaptive: adaptive(k, nil, false)})
		}},
		{Name: "adaptive-fair", New: func(k Knobs) (func(http.Handler) http.Handler, error) {
			return inboundMiddleware(k, inbound.Options{Adaptive: adaptive(k, nil, true)})
		}},
		{Name: "adaptive-codel-fair", New: func(k Knobs) (func(http.Handler) http.Handler, error) {
			return inboundMiddleware(k, inbound.Options{Adaptive: adaptive(k, &resilience.CoDelOptions{}, true)})
		}},
	}
}
