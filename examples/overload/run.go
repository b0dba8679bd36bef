package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ylcnfrht/resilience/examples/overload/lab"
)

// defaultModes are the modes a scenario runs without -modes: the default
// (overload) run stays around a minute.
var defaultModes = map[string][]string{
	"overload": {"none", "fixed", "fixed-codel", "adaptive"},
	"priority": {"none", "fixed", "fixed-droplow", "fixed-codel", "adaptive"},
	"step":     {"fixed", "fixed-codel", "adaptive", "adaptive-codel"},
	"cpu":      {"none", "fixed", "fixed-codel", "adaptive"},
	lab.ScenarioRetryStorm: {"none-naive", "none-budget-throttle", "fixed-naive", "fixed-budget-throttle",
		"fixed-retrylast-naive", "fixed-retrylast-budget", "fixed-retrylast-throttle", "fixed-retrylast-budget-throttle"},
	"fair":                 {"fixed", "fixed-fair", "fixed-codel", "fixed-codel-fair", "adaptive-queue", "adaptive-fair"},
	lab.ScenarioFairClosed: {"fixed", "fixed-fair", "fixed-codel", "fixed-codel-fair", "adaptive-queue", "adaptive-codel-fair"},
}

// options is the parsed command line: the scenario and what else to do.
type options struct {
	cfg      lab.Config
	modes    []lab.Contender
	jsonPath string
	svgPath  string
	quiet    bool
	protocol string // "http" or "grpc" (grpc.go)
}

// parse reads the flags over the chosen scenario's preset. A flag changes
// the preset only when it is given.
func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("overload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def, _ := lab.Preset("overload")
	var (
		o        options
		scenario = fs.String("scenario", "overload", "preset: "+strings.Join(lab.Scenarios, ", ")+", soak or rollout (their own flags: -scenario soak -h)")
		modes    = fs.String("modes", "", "comma-separated modes, or all (default: the scenario's; see the package doc)")
		rate     = fs.Float64("rate", def.Rate, "offered load, requests per second (cpu: default 1.6 × the measured capacity)")
		duration = fs.Duration("duration", def.Duration, "how long each mode is loaded")
		arrivals = fs.String("arrivals", def.Arrivals, "arrival process: even or poisson")
		seed     = fs.Int64("seed", def.Seed, "seed of the poisson arrivals and of the priority classes")
		ctimeout = fs.Duration("client-timeout", def.ClientTimeout, "how long a client waits for its answer")
		retry    = fs.Bool("retry-once", false, "clients that time out send their request once more")
		workers  = fs.Int("workers", 0, "closed-loop load: this many workers, each sending its next request when the last is answered, instead of -rate (fair-closed: 60 noisy, 1 per quiet tenant)")
		resend   = fs.String("resend", lab.ResendNow, "what a closed-loop worker does after a 503: now, or retry-after (waits the Retry-After)")
		high     = fs.Float64("high", 0, "share of requests with high priority (X-Priority: 0), 0 to 1 (priority: 0.3)")
		service  = fs.String("service", def.Service, "simulated service: slots or cpu")
		slots    = fs.Int("slots", def.Slots, "slots of the slot pool")
		svcTime  = fs.Duration("service-time", def.ServiceTime, "time a request holds a slot (it keeps working after its client left)")
		steps    = fs.String("steps", "", "slot-pool capacity changes, e.g. 10s:50,20s:100 (step: that)")
		cpuWork  = fs.Duration("cpu-work", def.CPUWork, "CPU time of one request of the cpu service, calibrated at start")
		procs    = fs.Int("service-procs", 0, "GOMAXPROCS of the service process, 0 for every core (fewer leaves the generator a core)")
		pin      = fs.Bool("pin", def.PinCPUs, "pin the generator to one CPU and the service process to the others (Linux; cpu: on with 2 CPUs or more)")
		window   = fs.Duration("window", 0, "width of the per-window table, 0 for none (step: 5s)")
		limit    = fs.Int("limit", def.Knobs.Limit, "permit limit of the fixed limiters (cpu: 4)")
		queue    = fs.Int("queue", def.Knobs.Queue, "queue limit (cpu: 4)")
		qtimeout = fs.Duration("queue-timeout", def.Knobs.QueueTimeout, "longest wait in the queue")
		timeout  = fs.Duration("timeout", def.Knobs.Timeout, "server-side request timeout (504), 0 for none")
	)
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	fs.StringVar(&o.svgPath, "svg", "", "where to write the chart (default: overload-SCENARIO.svg in the temporary directory)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress line")
	fs.StringVar(&o.protocol, "protocol", "http", "http, or grpc: the service on grpc-go behind the gRPC adapter, loaded by grpc-go clients (slot scenarios only)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.protocol != "http" && o.protocol != "grpc" {
		return o, fmt.Errorf("-protocol: %q; want http or grpc", o.protocol)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q: this program takes flags only", fs.Arg(0))
	}
	cfg, err := lab.Preset(*scenario)
	if err != nil {
		return o, fmt.Errorf("-scenario: %w", err)
	}
	var perr error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "rate":
			cfg.Rate, cfg.RateFactor = *rate, 0
		case "duration":
			cfg.Duration = *duration
		case "arrivals":
			cfg.Arrivals = *arrivals
		case "seed":
			cfg.Seed = *seed
		case "client-timeout":
			cfg.ClientTimeout = *ctimeout
		case "retry-once":
			cfg.RetryOnce = *retry
		case "workers":
			cfg.Workers = *workers
			for i := range cfg.Tenants {
				cfg.Tenants[i].Workers = 0 // split by rate
			}
		case "resend":
			cfg.Resend = *resend
		case "high":
			cfg.High = *high
			cfg.Knobs.Prioritized = *high > 0
		case "service":
			cfg.Service = *service
			if cfg.Service == lab.ServiceCPU && cfg.RateFactor == 0 && !isSet(fs, "rate") {
				cfg.RateFactor = 1.6
			}
		case "slots":
			cfg.Slots = *slots
		case "service-time":
			cfg.ServiceTime = *svcTime
		case "steps":
			if cfg.Steps, err = lab.ParseSteps(*steps); err != nil {
				perr = fmt.Errorf("-steps: %w", err)
			}
		case "cpu-work":
			cfg.CPUWork = *cpuWork
		case "window":
			cfg.Window = *window
		case "service-procs":
			cfg.ServiceProcs = *procs
		case "pin":
			cfg.PinCPUs = *pin
		case "limit":
			cfg.Knobs.Limit = *limit
		case "queue":
			cfg.Knobs.Queue = *queue
		case "queue-timeout":
			cfg.Knobs.QueueTimeout = *qtimeout
		case "timeout":
			cfg.Knobs.Timeout = *timeout
		}
	})
	if perr != nil {
		return o, perr
	}
	if err := cfg.Validate(); err != nil {
		return o, err
	}
	o.cfg = cfg
	names := defaultModes[cfg.Scenario]
	if *modes != "" {
		names = strings.Split(*modes, ",")
	}
	if o.modes, err = pickModes(lab.Modes(cfg.Scenario), names); err != nil {
		return o, err
	}
	if o.svgPath == "" {
		o.svgPath = filepath.Join(os.TempDir(), "overload-"+cfg.Scenario+".svg")
	}
	return o, nil
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// pickModes returns the named modes in the order given; "all" is every one.
func pickModes(all []lab.Contender, names []string) ([]lab.Contender, error) {
	if len(names) == 1 && names[0] == "all" {
		return all, nil
	}
	var known []string
	for _, c := range all {
		known = append(known, c.Name)
	}
	var out []lab.Contender
	for _, n := range names {
		n = strings.TrimSpace(n)
		found := false
		for _, c := range all {
			if c.Name == n {
				out = append(out, c)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("-modes: unknown mode %q; want all or some of %s", n, strings.Join(known, ", "))
		}
	}
	return out, nil
}

// run is the program: 0 on success (and -h), 2 for invalid flags, 1 when
// the run fails.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "overload:", err)
		return 2
	}
	var progress io.Writer
	if !o.quiet {
		progress = stderr
	}
	if o.protocol == "grpc" {
		if err := runGRPC(ctx, o, stdout, progress); err != nil {
			fmt.Fprintln(stderr, "overload:", err)
			return 1
		}
		return 0
	}
	est := time.Duration(len(o.modes)) * (o.cfg.Duration + o.cfg.ClientTimeout + time.Second)
	fmt.Fprintf(stderr, "scenario %s, %d modes, about %v\n", o.cfg.Scenario, len(o.modes), est.Round(time.Second))
	rep, err := lab.Run(ctx, o.cfg, o.modes, progress)
	if err != nil {
		fmt.Fprintln(stderr, "overload:", err)
		return 1
	}
	if err := rep.WriteTable(stdout); err != nil {
		fmt.Fprintln(stderr, "overload:", err)
		return 1
	}
	if err := writeFile(o.svgPath, rep.WriteSVG); err != nil {
		fmt.Fprintln(stderr, "overload: -svg:", err)
		return 1
	}
	fmt.Fprintf(stdout, "\nchart: %s\n", o.svgPath)
	if o.jsonPath != "" {
		if err := writeFile(o.jsonPath, rep.WriteJSON); err != nil {
			fmt.Fprintln(stderr, "overload: -json:", err)
			return 1
		}
		fmt.Fprintf(stdout, "json: %s\n", o.jsonPath)
	}
	return 0
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
