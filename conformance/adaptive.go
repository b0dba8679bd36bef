package conformance

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// Adaptive case parameters. The simulated service answers in adaptiveBase
// up to adaptiveKnee requests at once and proportionally slower beyond,
// so its capacity is knee / base = 100 requests per second however many
// it is given. The limiter may go up to adaptiveMax, five times the knee,
// so the overload is the limiter's to shed, not the service's to queue.
const (
	adaptiveKnee     = 4
	adaptiveBase     = 40 * time.Millisecond
	adaptiveMin      = 2
	adaptiveInitial  = 4
	adaptiveMax      = 20
	adaptiveFactor   = 3.0 // offered load over capacity
	adaptiveOverload = 1500 * time.Millisecond
	adaptiveClients  = 3 // closed-loop clients after the overload: below the knee
	adaptiveRecovery = 5 // consecutive all-200 rounds that count as recovered
)

var adaptiveCases = []Case{
	{
		Name: "adaptive-sheds-and-recovers",
		Explanation: fmt.Sprintf("The adaptive limiter (Options.Adaptive) sheds under overload and recovers after it. A simulated service "+
			"answers in %v up to %d requests at once and proportionally slower beyond (capacity %.0f req/s); the limiter starts at %d "+
			"with MinLimit %d and MaxLimit %d, no queue. Offered %.0f × capacity open-loop for %v, requests must be shed with 503 "+
			"BULKHEAD_FULL, handlers running at once must never exceed MaxLimit, and every permit must come back. Then %d closed-loop "+
			"clients (below the knee) must within %v be admitted again: %d consecutive rounds where all of them get 200, with the live "+
			"limit above MinLimit. An adapter that loses the limiter's release or its classification fails here.",
			adaptiveBase, adaptiveKnee, float64(adaptiveKnee)/adaptiveBase.Seconds(), adaptiveInitial, adaptiveMin, adaptiveMax,
			adaptiveFactor, adaptiveOverload, adaptiveClients, waitDeadline, adaptiveRecovery),
		run: caseAdaptive,
	},
}

// kneeService simulates a service whose latency is flat up to knee
// requests at once and grows linearly beyond: the shape the adaptive
// limiter looks for. Like serviceHandler it ignores its context.
func kneeService(knee int, base time.Duration) http.Handler {
	var active atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := active.Add(1)
		d := base
		if n > int64(knee) {
			d = time.Duration(int64(base) * n / int64(knee))
		}
		time.Sleep(d)
		active.Add(-1)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
	})
}

func caseAdaptive(t *caseT, e *env) {
	opts := inbound.Options{
		Timeout: 2 * time.Second, // far above any latency the limit allows; a 504 is allowed but not expected
		Adaptive: &resilience.AdaptiveLimiterOptions{
			InitialLimit: adaptiveInitial,
			MinLimit:     adaptiveMin,
			MaxLimit:     adaptiveMax,
		},
	}
	s := e.start(opts, kneeService(adaptiveKnee, adaptiveBase))

	// Overload, open loop; the limit is watched meanwhile for the log.
	capacity := float64(adaptiveKnee) / adaptiveBase.Seconds()
	rate := adaptiveFactor * capacity
	n := int(rate * adaptiveOverload.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	stop := make(chan struct{})
	var watch sync.WaitGroup
	lowest, highest := adaptiveMax, 0
	watch.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				l := s.Stats().Limit
				lowest, highest = min(lowest, l), max(highest, l)
			}
		}
	})
	results := make([]result, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if t.Decided().Err() != nil {
			break
		}
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			results[i] = s.do(req{path: "/adaptive", ctx: ctx})
		})
	}
	wg.Wait()
	close(stop)
	watch.Wait()
	if t.Decided().Err() != nil {
		t.stopWaiting("the overload run")
	}

	var ok, shed, timeouts, errs int
	var other []string
	for _, r := range results {
		switch {
		case r.err != nil:
			errs++
		case r.status == http.StatusOK:
			ok++
		case r.status == http.StatusServiceUnavailable:
			expectRejection(t, "a shed request", r, http.StatusServiceUnavailable, "BULKHEAD_FULL", "full")
			shed++
		case r.status == http.StatusGatewayTimeout:
			timeouts++
		default:
			other = append(other, r.String())
		}
	}
	t.Logf("adaptive overload: %d requests at %.0f req/s (capacity %.0f req/s) over %v: %d ok, %d shed, %d timeouts, %d client errors; limit %d..%d during it (min %d, max %d)",
		n, rate, capacity, time.Since(start).Round(time.Millisecond), ok, shed, timeouts, errs, lowest, highest, adaptiveMin, adaptiveMax)
	if len(other) > 0 {
		t.Errorf("unexpected answers under overload: %v", other[:min(len(other), 5)])
	}
	// At three times capacity at least half must be shed whatever the
	// limit did (a limit of MaxLimit still admits at most capacity).
	if shed < n/2 {
		t.Errorf("only %d of %d requests were shed at %.0f × capacity: the adaptive limiter did not shed", shed, n, adaptiveFactor)
	}
	if ok == 0 {
		t.Errorf("no request was admitted during the overload")
	}
	if m := s.app.maxActive.Load(); m > adaptiveMax {
		t.Errorf("%d handlers ran at once, MaxLimit is %d", m, adaptiveMax)
	}
	s.waitIdle("after the overload")

	// Recovery: rounds of adaptiveClients concurrent requests, below the
	// knee, until adaptiveRecovery rounds in a row are all admitted and
	// the limit is above MinLimit, within waitDeadline.
	deadline := time.Now().Add(waitDeadline)
	streak, rounds := 0, 0
	var last []result
	for streak < adaptiveRecovery || s.Stats().Limit <= adaptiveMin {
		if t.Decided().Err() != nil {
			t.stopWaiting("the recovery")
		}
		if time.Now().After(deadline) {
			t.Errorf("not recovered %v after the overload: %d rounds, %d all-200 in a row, limit %d (MinLimit %d), last round %v",
				waitDeadline, rounds, streak, s.Stats().Limit, adaptiveMin, last)
			return
		}
		rounds++
		last = make([]result, adaptiveClients)
		var rw sync.WaitGroup
		for i := range last {
			rw.Go(func() { last[i] = s.do(req{path: "/adaptive"}) })
		}
		rw.Wait()
		all := true
		for _, r := range last {
			all = all && r.err == nil && r.status == http.StatusOK
		}
		if all {
			streak++
		} else {
			streak = 0
		}
	}
	t.Logf("adaptive recovery: %d rounds of %d clients until %d in a row were all admitted; limit %d", rounds, adaptiveClients, adaptiveRecovery, s.Stats().Limit)
	s.waitIdle("after the recovery")
}
