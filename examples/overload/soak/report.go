package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// row is one report interval.
type row struct {
	at     time.Duration
	d      counts
	secs   float64
	stats  serverStats
	polled bool // the server answered its stats poll
	load   string
	// genSched is the soak's own scheduling latency p99 (ms): a starved
	// generator sends late and reads its answers late.
	genSched float64
}

// result is the soak's outcome.
type result struct {
	rows  []row
	total counts
	held  bool
}

// Stall thresholds: an interval is a stall when an answer went missing or
// goodput fell below this share of capacity; memory has grown when the
// final RSS passes growthFactor × the RSS at one minute + growthSlack.
const (
	stallShare   = 0.5
	growthFactor = 1.5
	growthSlack  = 16 << 20
)

func soak(ctx context.Context, cfg *Config, addr string, w io.Writer) (*result, error) {
	cl := newClients(cfg, addr)
	poll := &http.Client{Timeout: min(2*time.Second, cfg.Interval/2), Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer poll.CloseIdleConnections()
	statsURL := "http://" + addr + statsPath

	fmt.Fprintf(w, "soak: chi + CoDel, capacity %.0f req/s, offered %.0f req/s (%.1f ×) for %v; load %s\n",
		cfg.capacity(), cfg.Rate, cfg.Rate/cfg.capacity(), cfg.Duration, loadAvg())
	fmt.Fprintf(w, "faults: panic %.0f %%, cancel %.0f %%, h2c %.0f %%, %d KB header %.0f %%, half-closed %.0f %%, %d slowloris\n",
		cfg.Panic*100, cfg.Cancel*100, cfg.H2C*100, cfg.LargeHeader>>10, cfg.Large*100, cfg.HalfClosed*100, cfg.Slowloris)
	fmt.Fprintf(w, "%7s %7s %6s %7s %5s %5s %5s %5s %5s %5s %7s %6s %6s %7s %7s %6s %6s %6s %6s %5s\n",
		"t", "sent/s", "skip/s", "good/s", "%cap", "200%", "503%", "504%", "500%", "oth%", "missing", "hc-no", "cancel", "RSS MB", "heap MB", "gor", "fds", "sch ms", "gen ms", "load")

	lctx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	loadDone := make(chan struct{})
	go func() { cl.run(lctx); close(loadDone) }()

	res := &result{}
	var gen schedTracker
	gen.p99() // from now on
	start := time.Now()
	prev, prevAt := cl.t.snapshot(), time.Duration(0)
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	emit := func() {
		at := time.Since(start)
		cur := cl.t.snapshot()
		r := row{at: at, d: cur.minus(prev), secs: (at - prevAt).Seconds(), load: loadAvg(), genSched: gen.p99()}
		r.stats, r.polled = pollStats(poll, statsURL)
		prev, prevAt = cur, at
		res.rows = append(res.rows, r)
		writeRow(w, cfg, r)
	}
	for done := false; !done; {
		select {
		case <-tick.C:
			emit()
		case <-loadDone:
			emit() // the tail: requests answered after the load stopped
			done = true
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res.total = cl.t.snapshot()
	summarise(w, cfg, cl, res)
	return res, nil
}

func pollStats(c *http.Client, url string) (serverStats, bool) {
	var st serverStats
	resp, err := c.Get(url)
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return st, false
	}
	return st, true
}

func writeRow(w io.Writer, cfg *Config, r row) {
	good := float64(r.d.ok) / r.secs
	pct := func(n int64) string {
		if a := r.d.answered(); a > 0 {
			return fmt.Sprintf("%.1f", 100*float64(n)/float64(a))
		}
		return "-"
	}
	srv := fmt.Sprintf("%7s %7s %6s %6s %6s", "-", "-", "-", "-", "-")
	if r.polled {
		srv = fmt.Sprintf("%7.1f %7.1f %6d %6d %6.0f", mb(r.stats.RSS), mb(r.stats.HeapInUse), r.stats.Goroutines, r.stats.FDs, r.stats.SchedP99)
	}
	fmt.Fprintf(w, "%7s %7.0f %6.0f %7.0f %5.1f %5s %5s %5s %5s %5s %7d %6d %6d %s %6.0f %5s\n",
		r.at.Round(time.Second), float64(r.d.sent)/r.secs, float64(r.d.skipped)/r.secs, good, 100*good/cfg.capacity(),
		pct(r.d.ok), pct(r.d.shed), pct(r.d.timeout), pct(r.d.internal), pct(r.d.other),
		r.d.missing, r.d.halfLost, r.d.cancelled, srv, r.genSched, r.load)
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// summarise prints the totals, the memory marks and the verdict, and sets
// res.held.
func summarise(w io.Writer, cfg *Config, cl *clients, res *result) {
	t := res.total
	fmt.Fprintf(w, "\ntotal: %d sent, %d answered (200 %d, 503 %d, 504 %d, 500 %d, other %d), %d cancelled by their client, %d missing, %d half-closed unanswered; %d arrivals skipped by a late generator\n",
		t.sent, t.answered(), t.ok, t.shed, t.timeout, t.internal, t.other, t.cancelled, t.missing, t.halfLost, t.skipped)
	var by []string
	for k := range nKinds {
		by = append(by, fmt.Sprintf("%s %d of %d", kindNames[k], cl.t.missingBy[k].Load(), cl.t.sentBy[k].Load()))
	}
	fmt.Fprintf(w, "unanswered by client (half-closed apart from missing): %s\n", strings.Join(by, ", "))
	by = by[:0]
	for e := range nErrs {
		by = append(by, fmt.Sprintf("%s %d", errNames[e], cl.t.errs[e].Load()))
	}
	fmt.Fprintf(w, "missing by error: %s\n", strings.Join(by, ", "))
	fmt.Fprintf(w, "slowloris: %d connections dialled, %d closed by the server\n", cl.t.lorisDials.Load(), cl.t.lorisClosed.Load())

	var marks []string
	var rss1m int64
	for _, m := range []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute} {
		if r, ok := firstAt(res.rows, m); ok && m <= cfg.Duration {
			marks = append(marks, fmt.Sprintf("%v RSS %.1f MB heap %.1f MB", m, mb(r.stats.RSS), mb(r.stats.HeapInUse)))
			if m == time.Minute {
				rss1m = r.stats.RSS
			}
		}
	}
	last := lastPolled(res.rows)
	marks = append(marks, fmt.Sprintf("end RSS %.1f MB heap %.1f MB", mb(last.stats.RSS), mb(last.stats.HeapInUse)))
	fmt.Fprintf(w, "memory: %s\n", strings.Join(marks, "; "))

	var why []string
	if t.missing > 0 {
		why = append(why, fmt.Sprintf("%d answers missing", t.missing))
	}
	var stalls []string
	var unpolled int
	minGood, maxRSS, maxFDs := -1.0, int64(0), int64(0)
	for i, r := range res.rows {
		if !r.polled {
			unpolled++
		} else {
			maxRSS, maxFDs = max(maxRSS, r.stats.RSS), max(maxFDs, r.stats.FDs)
		}
		if i == len(res.rows)-1 {
			continue // the tail after the load stopped
		}
		good := float64(r.d.ok) / r.secs / cfg.capacity()
		if minGood < 0 || good < minGood {
			minGood = good
		}
		if r.d.missing > 0 || good < stallShare {
			stalls = append(stalls, fmt.Sprintf("t=%v (%.0f %% of capacity, %d missing)", r.at.Round(time.Second), 100*good, r.d.missing))
		}
	}
	if n := len(stalls); n > 0 {
		more := ""
		if n > 5 {
			more = fmt.Sprintf(" and %d more", n-5)
			stalls = stalls[:5]
		}
		why = append(why, fmt.Sprintf("%d of %d intervals stalled: %s%s", n, len(res.rows)-1, strings.Join(stalls, ", "), more))
	}
	if unpolled > 0 {
		why = append(why, fmt.Sprintf("%d stats polls unanswered", unpolled))
	}
	if rss1m > 0 && float64(last.stats.RSS) > growthFactor*float64(rss1m)+growthSlack {
		why = append(why, fmt.Sprintf("RSS grew from %.1f MB at 1m to %.1f MB", mb(rss1m), mb(last.stats.RSS)))
	}
	good := float64(t.ok) / cfg.Duration.Seconds() / cfg.capacity()
	res.held = len(why) == 0
	verdict := "held"
	if !res.held {
		verdict = "NOT HELD: " + strings.Join(why, "; ")
	}
	fmt.Fprintf(w, "verdict: %s (goodput %.1f %% of capacity, worst interval %.1f %%, RSS max %.1f MB, fds max %d, load %s)\n",
		verdict, 100*good, 100*max(minGood, 0), mb(maxRSS), maxFDs, loadAvg())
}

func firstAt(rows []row, at time.Duration) (row, bool) {
	for _, r := range rows {
		if r.at >= at-time.Second && r.polled {
			return r, true
		}
	}
	return row{}, false
}

func lastPolled(rows []row) row {
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].polled {
			return rows[i]
		}
	}
	return row{}
}

// loadAvg is the one-minute load average ("?" where /proc is missing).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
