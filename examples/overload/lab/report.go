package lab

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the outcome of one Run: the scenario, the machine and one
// Result per contender. Its JSON form is stable enough for scripts.
type Report struct {
	Config Config `json:"config"`
	// Capacity is the service's capacity at the start, in requests per
	// second: slots / service time, or the CPU service's measured rate.
	Capacity  float64 `json:"capacity"`
	CPURounds int     `json:"cpuRounds,omitempty"`
	// ServiceProcs is the CPU service process's GOMAXPROCS, as it
	// reported it.
	ServiceProcs int `json:"serviceProcs,omitempty"`
	// Pinning says how the generator and the service shared the CPUs when
	// Config.PinCPUs asked for pinning ("generator on CPU 0, service on
	// CPU 1", or why it could not be done); empty when not asked.
	Pinning string   `json:"pinning,omitempty"`
	Machine Machine  `json:"machine"`
	Results []Result `json:"results"`
}

// Machine describes where a report was measured.
type Machine struct {
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
	CPU       string `json:"cpu,omitempty"`
	CPUs      int    `json:"cpus"`
	Host      string `json:"host,omitempty"`
	Load      string `json:"loadavg,omitempty"` // 1, 5, 15 min at the start
}

// Result is one contender's figures. Latencies are in milliseconds.
type Result struct {
	Contender string `json:"contender"`
	Sent      int    `json:"sent"` // attempts, retries included
	Retries   int    `json:"retries"`
	OK        int    `json:"ok"`       // 200 within the client timeout
	Shed      int    `json:"shed"`     // 503 or 429
	Timeouts  int    `json:"timeouts"` // no answer within the client timeout
	Failed    int    `json:"failed"`   // any other status (504 included) or error
	// Goodput is OK per second over the run, GoodputLast10 over its last
	// 10 s (or the whole run if shorter).
	Goodput       float64 `json:"goodput"`
	GoodputLast10 float64 `json:"goodputLast10"`
	P50           float64 `json:"p50"` // answered (OK) requests
	P99           float64 `json:"p99"`
	ShedP99       float64 `json:"shedP99"`
	// Wasted is work the service finished after its client had left;
	// Pending is work still running or waiting when the run ended. Both
	// are -1 when the service could not tell (a saturated child).
	Wasted  int64 `json:"wasted"`
	Pending int64 `json:"pending"`
	// Classes are the priority classes' shares answered in time (only
	// when the scenario sends classes), or the tenants' when it has
	// tenants (Class is then the tenant's name).
	Classes []ClassResult  `json:"classes,omitempty"`
	Windows []WindowResult `json:"windows,omitempty"`
	Series  []Point        `json:"series"`
	// The generator's own figures: how late it sent (p99 and worst, ms)
	// and the CPU seconds this process used during the run.
	LagP99     float64 `json:"lagP99"`
	LagMax     float64 `json:"lagMax"`
	ProcessCPU float64 `json:"processCPU"`
	Load       string  `json:"loadavg,omitempty"` // at the end of the run
	// The retry-storm scenario's figures, inline; nil for the others.
	*StormFigures
}

// ClassResult is one priority class.
type ClassResult struct {
	Class  string  `json:"class"`
	Sent   int     `json:"sent"`
	InTime int     `json:"inTime"`
	Share  float64 `json:"share"` // InTime / Sent
	// P99 is the p99 latency (ms) of the class's requests answered in
	// time, for tenants; 0 otherwise.
	P99 float64 `json:"p99,omitempty"`
}

// WindowResult is one window of the run (by the time outcomes were known).
type WindowResult struct {
	From     float64 `json:"from"` // seconds
	To       float64 `json:"to"`
	Capacity float64 `json:"capacity"` // req/s at the window's start
	Goodput  float64 `json:"goodput"`
	P99      float64 `json:"p99"`
}

// Point is one bucket of the time series, by the time answers arrived.
type Point struct {
	T       float64 `json:"t"` // seconds, the bucket's end
	Goodput float64 `json:"goodput"`
	Shed    float64 `json:"shed"` // 503s and 429s answered per second
	P99     float64 `json:"p99"`  // ms; 0 when nothing was answered
	// Partial marks a bucket that ends after the load stopped: it holds
	// only the answers to requests sent before, so its rates fall
	// although nothing collapsed. The chart leaves it out.
	Partial bool `json:"partial,omitempty"`
	// QuietMissed counts, in scenarios with tenants, the first attempts of
	// the quiet tenants (all but the first) sent in the bucket that were
	// not answered in time, by outcome: shed (503/429), client timeout,
	// failed (504 included). It says when a fair mode misses: at warm-up,
	// or all along.
	QuietMissed *Missed `json:"quietMissed,omitempty"`
}

// Missed counts requests not answered in time, by outcome.
type Missed struct {
	Shed    int `json:"shed"`
	Timeout int `json:"timeout"`
	Failed  int `json:"failed"`
}

func summarise(cfg *Config, capacity float64, name string, recs []record, lags []time.Duration) *Result {
	r := &Result{Contender: name}
	var okLat, shedLat []time.Duration
	var classSent, classOK [2]int
	var last10 int
	from10 := cfg.Duration - 10*time.Second
	span10 := 10 * time.Second
	if from10 < 0 {
		from10, span10 = 0, cfg.Duration
	}
	nb := int(math.Ceil(float64(cfg.Duration+cfg.ClientTimeout) / float64(cfg.Series)))
	buckets := make([][]time.Duration, nb)
	shedPer := make([]int, nb)
	var nw int
	if cfg.Window > 0 {
		nw = int(math.Ceil(float64(cfg.Duration) / float64(cfg.Window)))
	}
	windows := make([][]time.Duration, nw)
	var missed []Missed
	if len(cfg.Tenants) > 0 {
		missed = make([]Missed, nb)
	}
	for i, rec := range recs {
		if rec.kind == 0 {
			continue
		}
		if missed != nil && i%2 == 0 && rec.class > 0 && rec.kind != kindOK {
			if b := int((rec.end - rec.lat) / cfg.Series); b >= 0 && b < nb {
				switch rec.kind {
				case kindShed:
					missed[b].Shed++
				case kindTimeout:
					missed[b].Timeout++
				default:
					missed[b].Failed++
				}
			}
		}
		r.Sent++
		if i%2 == 1 {
			r.Retries++
		} else if int(rec.class) < len(classSent) {
			classSent[rec.class]++
		}
		switch rec.kind {
		case kindOK:
			r.OK++
			okLat = append(okLat, rec.lat)
			if int(rec.class) < len(classOK) {
				classOK[rec.class]++
			}
			if rec.end >= from10 && rec.end < from10+span10 {
				last10++
			}
			if b := int(rec.end / cfg.Series); b < nb {
				buckets[b] = append(buckets[b], rec.lat)
			}
			if w := int(rec.end / max(cfg.Window, 1)); cfg.Window > 0 && w < nw {
				windows[w] = append(windows[w], rec.lat)
			}
		case kindShed:
			r.Shed++
			shedLat = append(shedLat, rec.lat)
			if b := int(rec.end / cfg.Series); b < nb {
				shedPer[b]++
			}
		case kindTimeout:
			r.Timeouts++
		default:
			r.Failed++
		}
	}
	sortDurations(okLat)
	sortDurations(shedLat)
	sortDurations(lags)
	r.Goodput = round1(float64(r.OK) / cfg.Duration.Seconds())
	r.GoodputLast10 = round1(float64(last10) / span10.Seconds())
	r.P50, r.P99 = ms(percentile(okLat, 0.5)), ms(percentile(okLat, 0.99))
	r.ShedP99 = ms(percentile(shedLat, 0.99))
	r.LagP99, r.LagMax = ms(percentile(lags, 0.99)), ms(percentile(lags, 1))
	if cfg.High > 0 {
		for c, label := range []string{"low", "high"} {
			cr := ClassResult{Class: label, Sent: classSent[c], InTime: classOK[c]}
			if cr.Sent > 0 {
				cr.Share = math.Round(1000*float64(cr.InTime)/float64(cr.Sent)) / 1000
			}
			r.Classes = append(r.Classes, cr)
		}
	}
	if len(cfg.Tenants) > 0 {
		r.Classes = tenantResults(cfg, recs)
	}
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
		if missed != nil {
			r.Series[b].QuietMissed = &missed[b]
		}
	}
	for w, lat := range windows {
		sortDurations(lat)
		from := time.Duration(w) * cfg.Window
		to := min(from+cfg.Window, cfg.Duration)
		c := capacity
		if cfg.Service == ServiceSlots {
			c = cfg.slotCapacity(cfg.slotsAt(from))
		}
		r.Windows = append(r.Windows, WindowResult{
			From: from.Seconds(), To: to.Seconds(), Capacity: c,
			Goodput: round1(float64(len(lat)) / (to - from).Seconds()),
			P99:     ms(percentile(lat, 0.99)),
		})
	}
	return r
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// lastWindow names the column of GoodputLast10 by the window it really
// covers: the run's last 10 s, or its whole length when it is shorter
// ("last 6 s" for a 6 s run).
func lastWindow(run time.Duration) string {
	if run >= 10*time.Second {
		return "last 10 s"
	}
	return "last " + strconv.FormatFloat(run.Seconds(), 'f', -1, 64) + " s"
}

// WriteTable writes the report as text: a header naming the scenario and
// the machine, one row per contender, and the per-class and per-window
// tables when the scenario has them.
func (rep *Report) WriteTable(w io.Writer) error {
	c := rep.Config
	fmt.Fprintf(w, "scenario %s: %s for %v against capacity %.0f req/s (%s); client timeout %v%s\n",
		c.Scenario, loadLine(c), c.Duration, rep.Capacity, serviceLine(rep), c.ClientTimeout, retryLine(c))
	fmt.Fprintf(w, "knobs: limit %d, queue %d, queue timeout %v, timeout %v; %s, %s, %d CPUs%s, load %s\n",
		c.Knobs.Limit, c.Knobs.Queue, c.Knobs.QueueTimeout, c.Knobs.Timeout, rep.Machine.GoVersion, rep.Machine.OS, rep.Machine.CPUs, pinLine(rep), rep.Machine.Load)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tgoodput/s\t"+lastWindow(c.Duration)+"\tp50 ms\tp99 ms\tshed\tshed p99 ms\ttimeouts\tfailed\twasted\tpending\tlag p99 ms\tload\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%.1f\t%d\t%d\t%s\t%s\t%.1f\t%s\t\n",
			r.Contender, r.Goodput, r.GoodputLast10, r.P50, r.P99, r.Shed, r.ShedP99, r.Timeouts, r.Failed, count(r.Wasted), count(r.Pending), r.LagP99, firstField(r.Load))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := rep.starved(); n > 0 {
		fmt.Fprintf(w, "%d row(s) with lag p99 over %v: the generator itself was starved of CPU, so they measure the machine's load as much as the mode.\n", n, starvedLag)
	}
	if c.High > 0 {
		fmt.Fprintf(w, "\nanswered in time per class (%.0f %% high priority):\n", 100*c.High)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "mode\thigh\tlow\t")
		for _, r := range rep.Results {
			var hi, lo ClassResult
			for _, cr := range r.Classes {
				if cr.Class == "high" {
					hi = cr
				} else {
					lo = cr
				}
			}
			fmt.Fprintf(tw, "%s\t%.1f %%\t%.1f %%\t\n", r.Contender, 100*hi.Share, 100*lo.Share)
		}
		tw.Flush()
	}
	if len(c.Tenants) > 0 {
		if err := rep.writeTenantTable(w); err != nil {
			return err
		}
	}
	if c.Window > 0 && len(rep.Results) > 0 {
		fmt.Fprintf(w, "\ngoodput/s and p99 ms per %v window (capacity in brackets):\n", c.Window)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := []string{"mode"}
		for _, win := range rep.Results[0].Windows {
			head = append(head, fmt.Sprintf("%g-%gs [%.0f]", win.From, win.To, win.Capacity))
		}
		fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
		for _, r := range rep.Results {
			row := []string{r.Contender}
			for _, win := range r.Windows {
				row = append(row, fmt.Sprintf("%.0f / %.0f", win.Goodput, win.P99))
			}
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		tw.Flush()
	}
	return rep.writeStormTable(w)
}

func serviceLine(rep *Report) string {
	c := rep.Config
	if c.Service == ServiceCPU {
		return fmt.Sprintf("cpu: %d SHA-256 rounds ≈ %v per request, measured with GOMAXPROCS %d", rep.CPURounds, c.CPUWork, rep.ServiceProcs)
	}
	s := fmt.Sprintf("%d slots × %v", c.Slots, c.ServiceTime)
	for _, st := range c.Steps {
		s += fmt.Sprintf(", %d slots at %v", st.Slots, st.At)
	}
	return s
}

func pinLine(rep *Report) string {
	if rep.Pinning == "" {
		return ""
	}
	return " (" + rep.Pinning + ")"
}

func pinSentence(rep *Report) string {
	if rep.Pinning == "" {
		return ""
	}
	return "; " + rep.Pinning
}

func retryLine(c Config) string {
	if c.RetryOnce {
		return ", clients retry once on timeout"
	}
	return ""
}

func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return "-"
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func count(n int64) string {
	if n < 0 {
		return "n/a"
	}
	return fmt.Sprint(n)
}

// WriteMarkdown writes the report's tables in Markdown: the main table,
// then the per-class and per-window ones when the scenario has them.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	c := rep.Config
	fmt.Fprintf(w, "%s for %v against capacity %.0f req/s (%s); client timeout %v; load average at the start %s%s.\n\n",
		loadLine(c), c.Duration, rep.Capacity, serviceLine(rep), c.ClientTimeout, rep.Machine.Load, pinSentence(rep))
	fmt.Fprintln(w, "| contender | goodput/s | "+lastWindow(c.Duration)+" | p50 ms | p99 ms | shed | shed p99 ms | client timeouts | failed | wasted | pending | lag p99 ms |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rep.Results {
		mark := ""
		if r.LagP99 > ms(starvedLag) {
			mark = " †"
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f | %.0f | %d | %.1f | %d | %d | %s | %s | %.1f%s |\n",
			r.Contender, r.Goodput, r.GoodputLast10, r.P50, r.P99, r.Shed, r.ShedP99, r.Timeouts, r.Failed, count(r.Wasted), count(r.Pending), r.LagP99, mark)
	}
	if rep.starved() > 0 {
		fmt.Fprintf(w, "\n† lag p99 over %v: the load generator itself was starved of CPU, so the row measures the machine's load as much as the contender.\n", starvedLag)
	}
	if c.High > 0 {
		fmt.Fprintf(w, "\n| contender | high class in time | low class in time |\n|---|--:|--:|\n")
		for _, r := range rep.Results {
			var share [2]float64
			for _, cr := range r.Classes {
				if cr.Class == "high" {
					share[0] = cr.Share
				} else {
					share[1] = cr.Share
				}
			}
			fmt.Fprintf(w, "| %s | %.1f %% | %.1f %% |\n", r.Contender, 100*share[0], 100*share[1])
		}
	}
	if len(c.Tenants) > 0 {
		rep.writeTenantMarkdown(w)
	}
	if c.Window > 0 && len(rep.Results) > 0 {
		fmt.Fprintf(w, "\nGoodput/s / p99 ms per window (capacity):\n\n| contender |")
		for _, win := range rep.Results[0].Windows {
			fmt.Fprintf(w, " %g–%g s (%.0f) |", win.From, win.To, win.Capacity)
		}
		fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("--:|", len(rep.Results[0].Windows)))
		for _, r := range rep.Results {
			fmt.Fprintf(w, "| %s |", r.Contender)
			for _, win := range r.Windows {
				fmt.Fprintf(w, " %.0f / %.0f |", win.Goodput, win.P99)
			}
			fmt.Fprintln(w)
		}
	}
	rep.writeStormMarkdown(w)
	return nil
}

// starvedLag is the generator lag (p99) past which a row is flagged: the
// arrivals were no longer the scenario's.
const starvedLag = 50 * time.Millisecond

func (rep *Report) starved() int {
	n := 0
	for _, r := range rep.Results {
		if r.LagP99 > ms(starvedLag) {
			n++
		}
	}
	return n
}
