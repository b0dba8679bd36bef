// Package lab is an overload laboratory: it sends traffic over loopback
// to a simulated service behind any HTTP middleware and measures what the
// clients get (goodput, latency of answered and shed requests, client
// timeouts, priority classes, tenants) and what the service wasted. The
// traffic is open-loop (arrivals at a rate, whatever the answers) or,
// with Config.Workers or a tenant's Workers, closed-loop: workers that
// send their next request as soon as the last is answered, as worker
// pools do, re-sending after a 503 at once or after its Retry-After.
//
// A contender is any func(http.Handler) http.Handler, built per run from
// one set of Knobs, so the project's limiters and other libraries' are
// measured the same way. Scenarios are presets of Config (Preset); Run
// measures every contender in turn and returns a Report, which renders as
// a text table (WriteTable), an SVG chart (WriteSVG) and JSON.
//
// The service and the middleware under test run in a child process (the
// running binary, started again), so that the load generator does not
// share its scheduler: a program that uses the lab calls ServeChildIfAsked
// first thing in main (and in TestMain), with every contender it may run.
// With Config.PinCPUs (the cpu preset's default on two CPUs or more) they
// do not share CPUs either: the generator runs on one, the child on the
// others, so a CPU-bound service's capacity measured at start is the one
// it has during the run.
package lab

import (
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Knobs is the one set of settings every contender is built from, so that
// they are compared like for like. A contender ignores the knobs it has no
// option for.
type Knobs struct {
	Limit        int           `json:"limit"`        // requests running at once
	Queue        int           `json:"queue"`        // requests waiting for a slot
	QueueTimeout time.Duration `json:"queueTimeout"` // longest wait in the queue
	// Timeout is the server-side request timeout, for the contenders that
	// have one; 0 means none.
	Timeout time.Duration `json:"timeout"`
	// Rate is a rate limiter's requests per second (which needs a rate,
	// not a concurrency); 0 means the service's capacity at the start.
	Rate float64 `json:"rate"`
	// Prioritized is set when the scenario sends priority classes: a
	// contender that can rank requests should use PriorityOf.
	Prioritized bool `json:"prioritized"`
}

// Contender is a middleware under test.
type Contender struct {
	Name string
	// New builds a fresh middleware for one run; it is called once per run,
	// so no state carries over from one run to the next.
	New func(k Knobs) (func(http.Handler) http.Handler, error)
}

// PassThrough is the contender without any shedding.
var PassThrough = Contender{Name: "none", New: func(Knobs) (func(http.Handler) http.Handler, error) {
	return func(h http.Handler) http.Handler { return h }, nil
}}

// PriorityHeader carries a request's priority class: an integer, lower is
// more important. The lab sends HighPriority and LowPriority.
const PriorityHeader = "X-Priority"

// The two priority classes the lab sends.
const (
	HighPriority = 0
	LowPriority  = 5
)

// PriorityOf returns a request's priority from its X-Priority header,
// LowPriority when it is missing or malformed.
func PriorityOf(r *http.Request) int { return parsePriority(r.Header.Get(PriorityHeader)) }

func parsePriority(s string) int {
	p, err := strconv.Atoi(s)
	if err != nil {
		return LowPriority
	}
	return p
}

// Step changes the slot pool's capacity at a moment of the run.
type Step struct {
	At    time.Duration `json:"at"`
	Slots int           `json:"slots"`
}

// ParseSteps reads "10s:50,20s:100": at 10 s the pool has 50 slots, at
// 20 s 100. An empty string is no step.
func ParseSteps(s string) ([]Step, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var steps []Step
	for _, part := range strings.Split(s, ",") {
		at, n, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("step %q: want DURATION:SLOTS", part)
		}
		d, err := time.ParseDuration(at)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("step %q: bad duration %q", part, at)
		}
		k, err := strconv.Atoi(n)
		if err != nil || k <= 0 {
			return nil, fmt.Errorf("step %q: slots must be a positive integer", part)
		}
		if len(steps) > 0 && d <= steps[len(steps)-1].At {
			return nil, fmt.Errorf("step %q: steps must be in increasing time order", part)
		}
		steps = append(steps, Step{At: d, Slots: k})
	}
	return steps, nil
}

// Service kinds.
const (
	ServiceSlots = "slots" // a pool of slots held for the service time, like a dependency
	ServiceCPU   = "cpu"   // CPU-bound work
)

// Arrival processes.
const (
	ArrivalsEven    = "even"
	ArrivalsPoisson = "poisson"
)

// Config is one scenario: the offered load, the service and the knobs.
// Preset returns the named ones; every field can be changed after.
type Config struct {
	Scenario string `json:"scenario"`

	// Rate is the offered load in requests per second. For the cpu
	// service, RateFactor × the measured capacity is used instead when
	// RateFactor > 0.
	Rate       float64       `json:"rate"`
	RateFactor float64       `json:"rateFactor,omitempty"`
	Duration   time.Duration `json:"duration"`
	Arrivals   string        `json:"arrivals"`
	Seed       int64         `json:"seed"`
	// ClientTimeout is how long a client waits for its answer.
	ClientTimeout time.Duration `json:"clientTimeout"`
	// RetryOnce makes a client that timed out send its request once more.
	RetryOnce bool `json:"retryOnce"`
	// High is the share of requests sent with HighPriority (0: one class).
	High float64 `json:"high"`
	// Tenants, when set, split the traffic between client populations,
	// each at its own share of Rate, sent with TenantHeader; results then
	// report each tenant as a class.
	Tenants []Tenant `json:"tenants,omitempty"`
	// Workers, when greater than 0, makes the load closed-loop: that many
	// workers, each sending its next request as soon as the last one is
	// answered, instead of Rate's arrivals (split between the tenants in
	// proportion to their rates, unless a tenant has Workers of its own;
	// a tenant's Workers alone also make the load closed-loop). Resend is
	// what a worker does after a 503 or 429: ResendNow (the default) or
	// ResendRetryAfter.
	Workers int    `json:"workers,omitempty"`
	Resend  string `json:"resend,omitempty"`

	Service     string        `json:"service"`
	Slots       int           `json:"slots"`
	ServiceTime time.Duration `json:"serviceTime"`
	Steps       []Step        `json:"steps,omitempty"`
	// CPUWork is the target duration of one CPU-bound request on an idle
	// core; the child calibrates its SHA-256 rounds to it.
	CPUWork time.Duration `json:"cpuWork"`
	// ServiceProcs is the service process's GOMAXPROCS; 0 means every
	// core. With fewer cores than the machine has, the generator keeps a
	// core of its own (on a two-core machine, one core shows a CPU-bound
	// Go server collapsing before any middleware sees its requests: the
	// runtime polls the network rarely while handlers keep the core busy).
	ServiceProcs int `json:"serviceProcs,omitempty"`
	// PinCPUs runs the load generator (this process) on one CPU and the
	// service process on the others, so that the service's capacity,
	// measured at start on its own CPUs, is what it has during the run,
	// and the generator's parsing and dialling do not take CPU from it.
	// It needs Linux and two CPUs; elsewhere the run goes on unpinned and
	// the report says why. The cpu preset sets it on machines with two
	// CPUs or more.
	PinCPUs bool `json:"pinCPUs,omitempty"`

	serviceCPUs []int // set by Run when pinned: the service process's CPUs

	// Window is the width of the per-window table (0: none). Series is the
	// bucket of the time series of the chart.
	Window time.Duration `json:"window,omitempty"`
	Series time.Duration `json:"series"`

	Knobs Knobs `json:"knobs"`
}

// Scenarios are the preset names, in the order the lab lists them.
var Scenarios = []string{"overload", "priority", "step", "cpu", ScenarioRetryStorm, "fair", ScenarioFairClosed}

// Preset returns the named scenario's configuration with the default
// knobs (limit 100, queue 100, queue timeout 500 ms, timeout = the client
// timeout).
func Preset(name string) (Config, error) {
	c := Config{
		Scenario:      name,
		Arrivals:      ArrivalsEven,
		Seed:          1,
		ClientTimeout: time.Second,
		Service:       ServiceSlots,
		Slots:         100,
		ServiceTime:   200 * time.Millisecond,
		CPUWork:       2 * time.Millisecond,
		Series:        time.Second,
		Knobs:         Knobs{Limit: 100, Queue: 100, QueueTimeout: 500 * time.Millisecond, Timeout: time.Second},
	}
	switch name {
	case "overload":
		c.Rate, c.Duration = 800, 20*time.Second
	case "priority":
		c.Rate, c.Duration, c.High = 1000, 15*time.Second, 0.3
		c.Knobs.Prioritized = true
	case "step":
		c.Rate, c.Duration, c.Window = 600, 30*time.Second, 5*time.Second
		c.Steps = []Step{{10 * time.Second, 50}, {20 * time.Second, 100}}
	case "fair":
		c.Tenants, c.Duration = fairTenants(), 20*time.Second
		c.Rate = tenantRate(c.Tenants)
	case "cpu":
		c.Service, c.RateFactor, c.Duration = ServiceCPU, 1.6, 20*time.Second
		// A few CPU-bound requests saturate two cores: the fixed limit and
		// queue follow the cores, not the slot pool's 100.
		c.Knobs.Limit, c.Knobs.Queue = 4, 4
		c.PinCPUs = runtime.NumCPU() >= 2
	case ScenarioRetryStorm:
		stormPreset(&c)
	case ScenarioFairClosed:
		fairClosedPreset(&c)
	default:
		return Config{}, fmt.Errorf("unknown scenario %q; want one of %s", name, strings.Join(Scenarios, ", "))
	}
	return c, nil
}

// Capacity is the slot pool's capacity in requests per second with n
// slots.
func (c *Config) slotCapacity(n int) float64 {
	return float64(n) / c.ServiceTime.Seconds()
}

// slotsAt is the pool's size at offset t of the run.
func (c *Config) slotsAt(t time.Duration) int {
	n := c.Slots
	for _, s := range c.Steps {
		if t >= s.At {
			n = s.Slots
		}
	}
	return n
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Rate <= 0 && c.RateFactor <= 0:
		return fmt.Errorf("rate must be greater than 0")
	case c.Duration <= 0:
		return fmt.Errorf("duration must be greater than 0")
	case c.Arrivals != ArrivalsEven && c.Arrivals != ArrivalsPoisson:
		return fmt.Errorf("arrivals must be %s or %s, got %q", ArrivalsEven, ArrivalsPoisson, c.Arrivals)
	case c.ClientTimeout <= 0:
		return fmt.Errorf("client timeout must be greater than 0")
	case c.High < 0 || c.High > 1:
		return fmt.Errorf("high must be a share between 0 and 1, got %v", c.High)
	case c.Service != ServiceSlots && c.Service != ServiceCPU:
		return fmt.Errorf("service must be %s or %s, got %q", ServiceSlots, ServiceCPU, c.Service)
	case c.Slots <= 0:
		return fmt.Errorf("slots must be greater than 0")
	case c.ServiceTime <= 0:
		return fmt.Errorf("service time must be greater than 0")
	case c.CPUWork <= 0:
		return fmt.Errorf("cpu work must be greater than 0")
	case c.ServiceProcs < 0:
		return fmt.Errorf("service procs must not be negative")
	case c.Series <= 0:
		return fmt.Errorf("series bucket must be greater than 0")
	case c.Window < 0:
		return fmt.Errorf("window must not be negative")
	case c.Knobs.Limit <= 0:
		return fmt.Errorf("limit must be greater than 0")
	case c.Knobs.Queue < 0 || c.Knobs.QueueTimeout < 0 || c.Knobs.Timeout < 0:
		return fmt.Errorf("queue, queue timeout and timeout must not be negative")
	}
	if c.Workers < 0 {
		return fmt.Errorf("workers must not be negative")
	}
	if c.Resend != "" && c.Resend != ResendNow && c.Resend != ResendRetryAfter {
		return fmt.Errorf("resend must be %s or %s, got %q", ResendNow, ResendRetryAfter, c.Resend)
	}
	if c.ClosedLoop() && c.Scenario == ScenarioRetryStorm {
		return fmt.Errorf("the %s scenario's clients are open-loop: it has no closed-loop form", ScenarioRetryStorm)
	}
	if err := validateTenants(c.Tenants); err != nil {
		return err
	}
	if len(c.Tenants) > 0 && c.High > 0 {
		return fmt.Errorf("tenants and priority classes cannot be combined")
	}
	if c.Service == ServiceCPU && len(c.Steps) > 0 {
		return fmt.Errorf("capacity steps apply to the slots service only")
	}
	return nil
}
