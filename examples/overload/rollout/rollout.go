// Package rollout is the overload lab's rollout scenario: one overload,
// served by the fixed limiter first in shadow, then half enforced, then
// enforced, so that what shadow counted can be set beside what enforcing
// then shed.
//
//	go run ./examples/overload -scenario rollout [-json out.json]
//
// The service holds each request for -service-time without a capacity of
// its own (a dependency with room to spare), so the limit is the only
// thing that sheds and the prediction is the limit's alone.
package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// Asked reports whether args select this scenario (-scenario rollout).
func Asked(args []string) bool {
	for i, a := range args {
		a = strings.TrimLeft(a, "-")
		if a == "scenario=rollout" || (a == "scenario" && i+1 < len(args) && args[i+1] == "rollout") {
			return true
		}
	}
	return false
}

// Config is one rollout run.
type Config struct {
	Rate        float64       `json:"rate"`        // offered load, requests per second, evenly spaced
	Phase       time.Duration `json:"phase"`       // how long each share is kept
	Limit       int           `json:"limit"`       // the fixed limiter's permits (no queue)
	ServiceTime time.Duration `json:"serviceTime"` // how long the service holds a request
	Window      time.Duration `json:"window"`      // the width of a row of the chart
	Shares      []int         `json:"shares"`      // Options.Shadow shares, one per phase
}

// DefaultConfig is 800 req/s against 100 permits × 200 ms (500 req/s),
// 10 s per phase: shadow (100), half enforced (50), enforced (0).
func DefaultConfig() Config {
	return Config{Rate: 800, Phase: 10 * time.Second, Limit: 100, ServiceTime: 200 * time.Millisecond,
		Window: time.Second, Shares: []int{100, 50, 0}}
}

// Window is one row of the chart: what the clients got and what the
// middleware counted in shadow.
type Window struct {
	Start     time.Duration `json:"start"`
	Share     int           `json:"shadowShare"`
	Sent      int           `json:"sent"`
	OK        int           `json:"ok"`
	Shed      int           `json:"shed"`      // 503s sent
	WouldShed int           `json:"wouldShed"` // refusals counted in shadow, not sent
}

// Report is a run's chart and its prediction.
type Report struct {
	Config  Config   `json:"config"`
	Windows []Window `json:"windows"`
	// PredictedPerSec is the would-shed rate of the shadow phase (the
	// first), ShedPerSec the shed rate of the enforcing one (the last),
	// and ErrorPct their difference over the latter, in percent.
	PredictedPerSec float64 `json:"predictedPerSec"`
	ShedPerSec      float64 `json:"shedPerSec"`
	ErrorPct        float64 `json:"errorPct"`
}

// Run is the scenario's command line: flags, the run, the table.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("overload -scenario rollout", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.String("scenario", "rollout", "this scenario")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "offered load, requests per second")
	fs.DurationVar(&cfg.Phase, "phase", cfg.Phase, "duration of each phase")
	fs.IntVar(&cfg.Limit, "limit", cfg.Limit, "the limiter's permits (no queue)")
	fs.DurationVar(&cfg.ServiceTime, "service-time", cfg.ServiceTime, "time the service holds a request")
	jsonPath := fs.String("json", "", "also write the report as JSON to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if cfg.Rate <= 0 || cfg.Phase <= 0 || cfg.Limit <= 0 || cfg.ServiceTime <= 0 {
		fmt.Fprintln(stderr, "rollout: -rate, -phase, -limit and -service-time must be positive")
		return 2
	}
	rep, err := Measure(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "rollout:", err)
		return 1
	}
	rep.Print(stdout)
	if *jsonPath != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonPath, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "rollout:", err)
			return 1
		}
	}
	return 0
}

// Measure serves the rollout on loopback and loads it.
func Measure(ctx context.Context, cfg Config) (*Report, error) {
	m, err := inbound.New(inbound.Options{
		Name:        "rollout",
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: cfg.Limit},
		Shadow:      inbound.Shadow{Concurrency: cfg.Shares[0]},
	})
	if err != nil {
		return nil, err
	}
	service := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(cfg.ServiceTime):
		case <-r.Context().Done():
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: m.Handler(service), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 4096, MaxConnsPerHost: 0},
	}
	defer client.CloseIdleConnections()

	total := time.Duration(len(cfg.Shares)) * cfg.Phase
	nWin := int(math.Ceil(float64(total) / float64(cfg.Window)))
	type counts struct{ sent, ok, shed atomic.Int64 }
	wins := make([]counts, nWin)
	shadowAt := make([]uint64, nWin+1) // shadow refusals counted at each window's start
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	start := time.Now()
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(ctx, total+15*time.Second)
	defer cancel()

	// The phases and the windows' shadow readings, on their own clock.
	read := make(chan struct{})
	go func() {
		defer close(read)
		for i := 1; i <= nWin; i++ {
			at := start.Add(time.Duration(i) * cfg.Window)
			time.Sleep(time.Until(at))
			s := m.Stats().Shadow
			shadowAt[i] = s.Full + s.Queued
			if p := int(time.Duration(i) * cfg.Window / cfg.Phase); p < len(cfg.Shares) && time.Duration(i)*cfg.Window%cfg.Phase == 0 {
				o := m.Options()
				o.Shadow = inbound.Shadow{Concurrency: cfg.Shares[p]}
				_ = m.Reconfigure(o)
			}
		}
	}()
	for k := 0; ; k++ {
		at := start.Add(time.Duration(k) * interval)
		if at.Sub(start) >= total || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Until(at))
		w := int(at.Sub(start) / cfg.Window)
		wins[w].sent.Add(1)
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				wins[w].ok.Add(1)
			case http.StatusServiceUnavailable:
				wins[w].shed.Add(1)
			}
		})
	}
	wg.Wait()
	<-read
	rep := &Report{Config: cfg}
	for i := range nWin {
		t := time.Duration(i) * cfg.Window
		rep.Windows = append(rep.Windows, Window{
			Start: t, Share: cfg.Shares[min(int(t/cfg.Phase), len(cfg.Shares)-1)],
			Sent: int(wins[i].sent.Load()), OK: int(wins[i].ok.Load()), Shed: int(wins[i].shed.Load()),
			WouldShed: int(shadowAt[i+1] - shadowAt[i]),
		})
	}
	rep.summarize()
	return rep, nil
}

// summarize compares the first phase's would-shed rate with the last's
// shed rate, leaving out each phase's first window (the limiter filling
// up, the share just changed).
func (r *Report) summarize() {
	perPhase := int(r.Config.Phase / r.Config.Window)
	rate := func(phase int, f func(Window) int) float64 {
		n, sum := 0, 0
		for i := phase*perPhase + 1; i < (phase+1)*perPhase && i < len(r.Windows); i++ {
			sum += f(r.Windows[i])
			n++
		}
		if n == 0 {
			return 0
		}
		return float64(sum) / (float64(n) * r.Config.Window.Seconds())
	}
	r.PredictedPerSec = rate(0, func(w Window) int { return w.WouldShed })
	r.ShedPerSec = rate(len(r.Config.Shares)-1, func(w Window) int { return w.Shed })
	if r.ShedPerSec > 0 {
		r.ErrorPct = 100 * (r.PredictedPerSec - r.ShedPerSec) / r.ShedPerSec
	}
}

// Print writes the chart and the prediction.
func (r *Report) Print(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "rollout: %.0f req/s against %d permits × %v (capacity %.0f req/s), shadow shares %v, %v each\n\n",
		c.Rate, c.Limit, c.ServiceTime, float64(c.Limit)/c.ServiceTime.Seconds(), c.Shares, c.Phase)
	fmt.Fprintf(w, "%8s %7s %6s %6s %6s %10s  %s\n", "window", "shadow", "sent", "200", "503", "would-shed", "shed ■ would-shed □")
	for _, win := range r.Windows {
		bar := strings.Repeat("■", win.Shed/20) + strings.Repeat("□", win.WouldShed/20)
		fmt.Fprintf(w, "%8v %6d%% %6d %6d %6d %10d  %s\n", win.Start, win.Share, win.Sent, win.OK, win.Shed, win.WouldShed, bar)
	}
	fmt.Fprintf(w, "\nshadow predicted %.0f refusals/s; enforcing shed %.0f/s: %+.1f %%\n", r.PredictedPerSec, r.ShedPerSec, r.ErrorPct)
}
