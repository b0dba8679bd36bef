package conformance

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Overload parameters. The simulated service has overloadSlots slots, each
// busy overloadService per request, so its capacity is
// C = slots / service time = 100 requests per second. The sizes keep the
// case to about two and a half seconds and a few hundred requests, and the
// service time is long against scheduling noise on a loaded machine.
const (
	overloadSlots    = 4
	overloadService  = 40 * time.Millisecond
	overloadFactor   = 1.6
	overloadDuration = 2 * time.Second
	overloadBudget   = 500 * time.Millisecond // inbound Timeout: the latency budget
	overloadClientTO = time.Second            // the clients' own timeout
)

// overloadThresholds are the pass marks. Under the race detector the
// client, the server and the middleware all run several times slower on
// the same two cores, so the marks are relaxed there, honestly and
// explicitly; without it they are the full marks.
type overloadThresholds struct {
	goodput   float64       // fraction of C answered 200 within the client timeout
	rejectP50 time.Duration // median latency of immediate 503s (reason full)
	rejectP90 time.Duration
}

func overloadMarks() overloadThresholds {
	if raceEnabled {
		return overloadThresholds{goodput: 0.80, rejectP50: 30 * time.Millisecond, rejectP90: 100 * time.Millisecond}
	}
	return overloadThresholds{goodput: 0.90, rejectP50: 10 * time.Millisecond, rejectP90: 30 * time.Millisecond}
}

var overloadCases = []Case{
	{
		Name: "overload-goodput",
		Explanation: fmt.Sprintf("Load shedding keeps goodput up under overload. A simulated service of capacity C = %d slots × %v "+
			"(%.0f req/s; it does not watch its context) is offered %.1f × C open-loop for %v, clients timing out after %v; inbound "+
			"is PermitLimit %d, QueueLimit %d, QueueTimeout %v, Timeout %v (the budget). Goodput (200s within the client timeout, per "+
			"second) must be at least 90%% of C, the p99 latency of admitted requests within the budget, and immediate rejections "+
			"(503 full) answered within a few milliseconds: median ≤ 10 ms, p90 ≤ 30 ms. The measurement is taken up to three times on a "+
			"fresh server and passes when one attempt meets every mark (a shared machine's neighbours can starve one run; a "+
			"regression fails them all); a 504 is allowed but is not goodput. Under the race detector everything runs "+
			"several times slower on the same cores, so the marks are relaxed there to goodput ≥ 80%% of C, median ≤ 30 ms, p90 ≤ 100 ms; "+
			"the latency budget is not relaxed.",
			overloadSlots, overloadService, float64(overloadSlots)/overloadService.Seconds(), overloadFactor, overloadDuration,
			overloadClientTO, overloadSlots, overloadSlots, 100*time.Millisecond, overloadBudget),
		run: caseOverload,
	},
}

// serviceHandler simulates a service with a fixed number of slots: each
// request holds a slot for the service time. It ignores its context, like
// a service doing CPU work or calling something that does not take one;
// requests beyond the slots wait for one, as they would in a real
// service's thread pool, which is what makes unshed overload collapse.
func serviceHandler(slots int, service time.Duration) http.Handler {
	sem := make(chan struct{}, slots)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sem <- struct{}{}
		time.Sleep(service)
		<-sem
		_, _ = w.Write([]byte("ok"))
	})
}

// overloadAttempts bounds the reruns of the overload measurement. A load
// test on a shared machine measures the machine as much as the code: a
// neighbour that takes the cores for a second starves the load generator
// and the server alike. The case passes when one attempt meets every mark;
// a real regression fails them all. Each attempt is logged.
const overloadAttempts = 3

func caseOverload(t *caseT, e *env) {
	var problems []string
	for attempt := 1; attempt <= overloadAttempts; attempt++ {
		problems = overloadAttempt(t, e, attempt)
		if len(problems) == 0 {
			return
		}
		t.Logf("overload attempt %d of %d missed: %v", attempt, overloadAttempts, problems)
	}
	for _, p := range problems {
		t.Errorf("%s (every one of %d attempts missed a mark; this is the last)", p, overloadAttempts)
	}
}

// overloadAttempt runs one overload measurement on a fresh server and
// returns the marks it missed.
func overloadAttempt(t *caseT, e *env, attempt int) (problems []string) {
	marks := overloadMarks()
	miss := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	s := e.start(limited(overloadBudget, resilience.ConcurrencyLimiterOptions{
		PermitLimit:  overloadSlots,
		QueueLimit:   overloadSlots,
		QueueTimeout: 100 * time.Millisecond,
	}), serviceHandler(overloadSlots, overloadService))

	capacity := float64(overloadSlots) / overloadService.Seconds() // req/s
	rate := overloadFactor * capacity
	n := int(rate * overloadDuration.Seconds())
	interval := time.Duration(float64(time.Second) / rate)

	type sample struct {
		r   result
		end time.Time
	}
	samples := make([]sample, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n && t.Decided().Err() == nil; i++ {
		// Open loop: requests leave on schedule whether or not earlier
		// ones were answered, as independent clients do.
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), overloadClientTO)
			defer cancel()
			r := s.do(req{path: "/service", ctx: ctx})
			samples[i] = sample{r: r, end: time.Now()}
		}()
	}
	wg.Wait()
	if t.Decided().Err() != nil {
		t.stopWaiting("the overload run")
	}

	var (
		admitted, rejectFull []time.Duration
		queueTimeouts        int
		timeouts             int
		clientErrors         int
		other                []string
		lastOK               time.Time
	)
	for _, sm := range samples {
		r := sm.r
		switch {
		case r.err != nil:
			clientErrors++
		case r.status == http.StatusOK:
			admitted = append(admitted, r.elapsed)
			if sm.end.After(lastOK) {
				lastOK = sm.end
			}
		case r.status == http.StatusServiceUnavailable:
			b, _ := t.decodeRejection(r)
			if b.Reason == string(resilience.ReasonQueueTimeout) {
				queueTimeouts++
			} else {
				rejectFull = append(rejectFull, r.elapsed)
			}
		case r.status == http.StatusGatewayTimeout:
			// Allowed (the handler ignores its context; a starved machine
			// can push it past the budget), but it is not goodput.
			timeouts++
		default:
			other = append(other, r.String())
		}
	}
	window := lastOK.Sub(start)
	goodput := 0.0
	if window > 0 {
		goodput = float64(len(admitted)) / window.Seconds()
	}
	t.Logf("overload attempt %d: offered %d requests at %.0f req/s (C = %.0f req/s) over %v; %d admitted, %d rejected full, %d queue timeouts, %d timeouts, %d client errors, %d other; goodput %.1f req/s (%.0f%% of C) over %v; admitted p50 %v p99 %v; rejection p50 %v p90 %v (race %v)",
		attempt, n, rate, capacity, overloadDuration, len(admitted), len(rejectFull), queueTimeouts, timeouts, clientErrors, len(other),
		goodput, 100*goodput/capacity, window.Round(time.Millisecond),
		percentile(admitted, 50), percentile(admitted, 99), percentile(rejectFull, 50), percentile(rejectFull, 90), raceEnabled)

	if goodput < marks.goodput*capacity {
		miss("goodput %.1f req/s is below %.0f%% of capacity %.0f req/s", goodput, 100*marks.goodput, capacity)
	}
	if p := percentile(admitted, 99); p > overloadBudget {
		miss("admitted p99 latency %v exceeds the budget %v", p, overloadBudget)
	}
	if len(rejectFull) == 0 {
		miss("no request was rejected at once under %.1f × capacity: nothing was shed", overloadFactor)
	} else {
		if p := percentile(rejectFull, 50); p > marks.rejectP50 {
			miss("median rejection latency %v exceeds %v", p, marks.rejectP50)
		}
		if p := percentile(rejectFull, 90); p > marks.rejectP90 {
			miss("p90 rejection latency %v exceeds %v", p, marks.rejectP90)
		}
	}
	// Correctness is not a measurement: these fail the case at once.
	if len(other) > 0 {
		t.Errorf("unexpected answers under overload: %v", other[:min(len(other), 5)])
	}
	s.waitIdle("after the overload")
	if m := s.app.maxActive.Load(); m > overloadSlots {
		t.Errorf("%d handlers ran at once, PermitLimit is %d", m, overloadSlots)
	}
	return problems
}

// percentile returns the p-th percentile (nearest rank) of ds, or 0.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}
