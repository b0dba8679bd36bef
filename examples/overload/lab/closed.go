package lab

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Re-send policies of a closed-loop worker after a 503 or 429.
const (
	// ResendNow sends the next request at once, as most clients and
	// worker pools do.
	ResendNow = "now"
	// ResendRetryAfter waits the response's Retry-After (1 s when it has
	// none) first.
	ResendRetryAfter = "retry-after"
)

// ScenarioFairClosed is the closed-loop fair scenario: tenants are
// worker pools that send their next request as soon as the last one is
// answered and re-send at once after a rejection, against 20 slots.
const ScenarioFairClosed = "fair-closed"

// fairClosedPreset is the fair-closed scenario: 20 slots × 200 ms (100
// req/s) behind a limit of 20; one tenant of 60 workers and nine of one
// worker each, every worker re-sending at once after a 503. A quiet
// tenant asks for one permit, under its share of two; the noisy tenant
// asks for 60.
func fairClosedPreset(c *Config) {
	// The rates are the workers' proportions, for -workers.
	c.Tenants = []Tenant{{Name: "noisy", Rate: 60, Workers: 60}}
	for i := 1; i <= 9; i++ {
		c.Tenants = append(c.Tenants, Tenant{Name: fmt.Sprintf("quiet-%d", i), Rate: 1, Workers: 1})
	}
	c.Rate = tenantRate(c.Tenants) // unused by a closed loop
	c.Duration = 20 * time.Second
	c.Slots, c.Knobs.Limit = 20, 20
	c.Resend = ResendNow
}

// ClosedLoop reports whether the load is closed-loop: workers instead of
// arrivals (Config.Workers or a tenant's Workers set).
func (c *Config) ClosedLoop() bool {
	if c.Workers > 0 {
		return true
	}
	for _, t := range c.Tenants {
		if t.Workers > 0 {
			return true
		}
	}
	return false
}

// worker is one closed-loop client: its class (the tenant's index, or 1
// for the high priority class).
type worker struct{ class uint8 }

// closedWorkers returns the workers of a closed-loop run: each tenant's
// own, or Workers split between the tenants in proportion to their rates
// (at least one each), or between the priority classes by High.
func closedWorkers(cfg *Config) []worker {
	var ws []worker
	add := func(n int, class uint8) {
		for range n {
			ws = append(ws, worker{class: class})
		}
	}
	switch {
	case len(cfg.Tenants) > 0:
		total := tenantRate(cfg.Tenants)
		for i, t := range cfg.Tenants {
			n := t.Workers
			if n == 0 {
				n = max(1, int(math.Round(float64(cfg.Workers)*t.Rate/total)))
			}
			add(n, uint8(i))
		}
	default:
		high := int(math.Round(cfg.High * float64(cfg.Workers)))
		add(high, 1)
		add(cfg.Workers-high, 0)
	}
	return ws
}

// workerCount is the number of closed-loop workers.
func (c *Config) workerCount() int { return len(closedWorkers(c)) }

// runClosed loads the target with closed-loop workers until the run's
// duration has passed: each sends a request, waits for its outcome, and
// sends the next at once, or after a rejection as cfg.Resend says. The
// workers start spread over a service time, as a pool that ramps up
// would. It returns the records in the open loop's layout (every request
// a first attempt, at the even indices).
func runClosed(ctx context.Context, cfg *Config, start time.Time, send func(start time.Time, class uint8) (record, time.Duration)) []record {
	ws := closedWorkers(cfg)
	per := make([][]record, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			ramp := time.Duration(i) * cfg.ServiceTime / time.Duration(len(ws))
			if !sleepCtx(ctx, ramp) {
				return
			}
			for ctx.Err() == nil && time.Since(start) < cfg.Duration {
				r, retryAfter := send(start, w.class)
				per[i] = append(per[i], r)
				if r.kind == kindShed && cfg.Resend == ResendRetryAfter && !sleepCtx(ctx, retryAfter) {
					return
				}
			}
		})
	}
	wg.Wait()
	n := 0
	for _, p := range per {
		n += len(p)
	}
	recs := make([]record, 0, 2*n)
	for _, p := range per {
		for _, r := range p {
			recs = append(recs, r, record{})
		}
	}
	return recs
}

// sleepCtx sleeps d, or less if ctx ends first, and reports whether ctx
// is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retryAfter is a response's Retry-After in seconds, 1 s when it has
// none or it cannot be read.
func retryAfter(resp *http.Response) time.Duration {
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	return time.Second
}

// loadLine describes the offered load for the report's header.
func loadLine(c Config) string {
	if c.ClosedLoop() {
		resend := c.Resend
		if resend == "" {
			resend = ResendNow
		}
		return fmt.Sprintf("closed loop: %d workers, re-send %s after a 503", c.workerCount(), resend)
	}
	return fmt.Sprintf("%.0f req/s offered (%s arrivals)", c.Rate, c.Arrivals)
}
