package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

var stressCases = []Case{
	{
		Name: "stress-invariants",
		Explanation: "Invariants under a randomized run (the seed is logged): 320 requests from 10 concurrent clients mixing fast, " +
			"slow, context-ignoring, panicking, aborting, erroring and client-cancelled handlers, with priorities and a random " +
			"overflow policy. Handlers observed running at once never exceed PermitLimit (invariant 1); in flight and queued " +
			"return to zero (invariant 2); every goroutine started for the run ends (invariant 4); every answer is one the " +
			"table allows.",
		run: caseStress,
	},
}

// stressKinds are the handler behaviours of the stress run, each with its
// weight in the mix: mostly admitted work, so that permits churn, with
// enough slow, failing and abandoned requests to exercise every release path.
var stressKinds = []struct {
	kind   string
	weight int
}{
	{"ok", 25}, {"work", 30}, {"slow-watch", 3}, {"slow-ignore", 3},
	{"panic", 8}, {"abort", 7}, {"error", 10}, {"cancel", 10},
}

func pickKind(rng *rand.Rand) string {
	total := 0
	for _, k := range stressKinds {
		total += k.weight
	}
	n := rng.IntN(total)
	for _, k := range stressKinds {
		if n < k.weight {
			return k.kind
		}
		n -= k.weight
	}
	return "ok"
}

func stressHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		d, _ := time.ParseDuration(q.Get("d"))
		switch q.Get("k") {
		case "work", "cancel":
			timer := time.NewTimer(d)
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-r.Context().Done():
				return
			}
		case "slow-watch":
			<-r.Context().Done()
			return
		case "slow-ignore":
			time.Sleep(d) // ignores its context on purpose
		case "panic":
			panic("conformance: deliberate panic in the stress run")
		case "abort":
			panic(http.ErrAbortHandler)
		case "error":
			http.Error(w, "deliberate error", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
}

func caseStress(t *caseT, e *env) {
	seed := rand.Uint64()
	t.Logf("stress seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	policies := []resilience.OverflowPolicy{resilience.OverflowRejectNew, resilience.OverflowDropOldest, resilience.OverflowDropLowestPriority}
	policy := policies[rng.IntN(len(policies))]
	const (
		permits  = 4
		requests = 320
		clients  = 10
		timeout  = 80 * time.Millisecond
	)

	// Leak check, registered before the server so it runs after the
	// server's cleanup has closed everything.
	baseline := runtime.NumGoroutine()
	t.Cleanup(func() {
		var n int
		if !pollUntil(func() bool { n = runtime.NumGoroutine(); return n <= baseline }) {
			t.Errorf("goroutine leak: %d goroutines after the run, %d before (invariant 4)\n%s", n, baseline, truncate(goroutineStacks(), 8000))
		}
	})

	s := e.start(limited(timeout, resilience.ConcurrencyLimiterOptions{
		PermitLimit:  permits,
		QueueLimit:   4,
		QueueTimeout: 100 * time.Millisecond,
		Priority:     priorityFromHeader,
		Overflow:     policy,
	}), stressHandler())

	// The plan is drawn up front from the seed so that the run's requests
	// do not depend on scheduling.
	type planned struct {
		kind   string
		d      time.Duration
		prio   int
		cancel time.Duration
	}
	plan := make([]planned, requests)
	for i := range plan {
		p := planned{kind: pickKind(rng), prio: rng.IntN(4)}
		switch p.kind {
		case "work":
			p.d = time.Duration(rng.IntN(10)) * time.Millisecond
		case "slow-ignore":
			// Well past the deadline, so the 504 nearly always wins the
			// race against the handler's own late answer.
			p.d = timeout + 60*time.Millisecond + time.Duration(rng.IntN(60))*time.Millisecond
		case "cancel":
			p.d = time.Second
			p.cancel = time.Duration(rng.IntN(30)) * time.Millisecond
		}
		plan[i] = p
	}

	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		bad      []string
	)
	work := make(chan int)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				p := plan[i]
				ctx, cancel := context.WithCancel(context.Background())
				var stop *time.Timer
				if p.cancel > 0 {
					stop = time.AfterFunc(p.cancel, cancel)
				}
				r := s.do(req{
					path:   fmt.Sprintf("/stress?k=%s&d=%s", p.kind, p.d),
					header: prio(p.prio),
					ctx:    ctx,
				})
				if stop != nil {
					stop.Stop()
				}
				cancel()
				if r.status == http.StatusServiceUnavailable {
					// A shed client backs off a little, as real ones
					// do; otherwise the run spends its requests on
					// rejections while a slow handler holds the permits.
					time.Sleep(3 * time.Millisecond)
				}
				label, ok := classify(t, p.kind, r)
				mu.Lock()
				outcomes[p.kind+" → "+label]++
				if !ok && !errors.Is(r.err, errStopped) { // a stopped request is no finding of its own
					bad = append(bad, fmt.Sprintf("request %d (%s): %v", i, p.kind, r))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range plan {
		work <- i
	}
	close(work)
	wg.Wait()

	if m := s.app.maxActive.Load(); m > permits {
		t.Errorf("invariant 1: %d handlers ran at once, PermitLimit is %d", m, permits)
	}
	s.waitIdle("invariant 2, after the stress run")
	if !pollUntil(func() bool { return s.app.active.Load() == 0 }) {
		t.Errorf("%d handlers still running after the stress run", s.app.active.Load())
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		if len(bad) > 10 {
			bad = append(bad[:10], "… and "+strconv.Itoa(len(bad)-10)+" more")
		}
		t.Errorf("answers the inbound table does not allow (seed %d, policy %s):\n%s", seed, policy, indent(bad))
	}
	keys := make([]string, 0, len(outcomes))
	for k := range outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var summary []string
	for _, k := range keys {
		summary = append(summary, fmt.Sprintf("%s: %d", k, outcomes[k]))
	}
	t.Logf("stress outcomes (policy %s, max concurrency %d):\n%s", policy, s.app.maxActive.Load(), indent(summary))
}

// classify labels an answer and says whether the inbound table allows it
// for a handler of that kind. Any request may be shed (503), and any
// request may get a 504: on a loaded machine even an instant handler can
// be descheduled past the deadline.
func classify(t *caseT, kind string, r result) (string, bool) {
	if r.err != nil {
		// Connections are closed by panics, and by the client itself.
		return "closed", kind == "panic" || kind == "abort" || kind == "cancel"
	}
	label := strconv.Itoa(r.status)
	if r.status == http.StatusServiceUnavailable {
		b, _ := t.decodeRejection(r)
		label += " " + b.Reason
	}
	switch r.status {
	case http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return label, true
	case http.StatusOK:
		// A slow-ignore handler answers 200 only when the deadline's timer
		// ran later than the handler's own sleep, which a heavily loaded
		// machine can do; the 504-on-time guarantee has its own cases.
		return label, (kind == "ok" || kind == "work" || kind == "slow-ignore") && string(r.body) == "ok"
	case http.StatusInternalServerError:
		return label, kind == "error" || kind == "panic"
	}
	return label, false
}
