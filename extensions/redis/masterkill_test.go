package resilienceredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// killPhase names the stretches of a master-kill run.
var killPhases = [...]string{"before", "during", "after"}

// phaseTally is what the takes of one phase did.
type phaseTally struct {
	takes, failed       int64
	failedCost          time.Duration // summed over failed takes
	nodeDown            int64         // failed at once with ErrNodeDown
	otherTakes          int64         // takes of keys not on the killed master
	otherFailed         int64         // failures of keys not on the killed master
	failingKeys         map[int]bool
	causes              map[ratelimit.StoreReason]int64
	otherCauses         map[ratelimit.StoreReason]int64
	elapsed             time.Duration
	lastVictimFailureAt time.Time
}

// killRun loads a cluster's store with takes over keys from workers
// goroutines, kills the master of victim keys, and restarts it (or waits
// for its replica), tallying each phase.
type killRun struct {
	t        *testing.T
	c        *redisCluster
	store    *Store
	p        ratelimit.Policy
	keys     int
	onVictim []bool
	victim   *clusterNode

	mu    sync.Mutex
	phase int
	tally [len(killPhases)]phaseTally
	start [len(killPhases)]time.Time
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newKillRun(t *testing.T, c *redisCluster, store *Store, keys int) *killRun {
	r := &killRun{t: t, c: c, store: store, keys: keys, stop: make(chan struct{}),
		p: ratelimit.Policy{Name: "kill", Limit: 1_000_000, Window: time.Hour}}
	r.victim = c.masterOf(store.key("k0", r.p))
	for k := range keys {
		r.onVictim = append(r.onVictim, c.masterOf(store.key("k"+strconv.Itoa(k), r.p)) == r.victim)
	}
	for i := range r.tally {
		r.tally[i] = phaseTally{failingKeys: map[int]bool{}, causes: map[ratelimit.StoreReason]int64{}, otherCauses: map[ratelimit.StoreReason]int64{}}
	}
	return r
}

func (r *killRun) run(workers int) {
	r.start[0] = time.Now()
	var seq atomic.Int64
	for range workers {
		r.wg.Go(func() {
			for {
				select {
				case <-r.stop:
					return
				default:
				}
				k := int(seq.Add(1)) % r.keys
				t0 := time.Now()
				_, err := r.store.Take(context.Background(), "k"+strconv.Itoa(k), r.p)
				took := time.Since(t0)
				r.mu.Lock()
				tl := &r.tally[r.phase]
				tl.takes++
				if !r.onVictim[k] {
					tl.otherTakes++
				}
				if err != nil {
					tl.failed++
					tl.failedCost += took
					tl.failingKeys[k] = true
					reason := ratelimit.ReasonOf(err)
					tl.causes[reason]++
					if errors.Is(err, ErrNodeDown) {
						tl.nodeDown++
					}
					if r.onVictim[k] {
						tl.lastVictimFailureAt = time.Now()
					} else {
						tl.otherFailed++
						tl.otherCauses[reason]++
					}
				}
				r.mu.Unlock()
			}
		})
	}
}

func (r *killRun) next() {
	r.mu.Lock()
	now := time.Now()
	r.tally[r.phase].elapsed = now.Sub(r.start[r.phase])
	r.phase++
	if r.phase < len(killPhases) {
		r.start[r.phase] = now
	}
	r.mu.Unlock()
}

func (r *killRun) end() {
	close(r.stop)
	r.wg.Wait()
	r.tally[r.phase].elapsed = time.Since(r.start[r.phase])
}

// sinceVictimFailed is how long the phase has gone without a failure of
// a key on the killed master (from the phase's start if none).
func (r *killRun) sinceVictimFailed() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.tally[r.phase].lastVictimFailureAt
	if last.IsZero() {
		last = r.start[r.phase]
	}
	return time.Since(last)
}

func (r *killRun) victimKeys() int {
	n := 0
	for _, v := range r.onVictim {
		if v {
			n++
		}
	}
	return n
}

// report logs each phase: throughput, share of keys failing, failures and
// their mean cost, causes.
func (r *killRun) report(name string) {
	r.t.Helper()
	for i, tl := range r.tally {
		cost := time.Duration(0)
		if tl.failed > 0 {
			cost = tl.failedCost / time.Duration(tl.failed)
		}
		r.t.Logf("%s %-6s %4.1f s: %6.0f decisions/s (%6.0f takes/s), %d/%d keys failing (%d on the killed master), %d of %d takes failed (%d at once, node-down), mean cost of a failed take %v, causes %v",
			name, killPhases[i], tl.elapsed.Seconds(), float64(tl.takes-tl.failed)/tl.elapsed.Seconds(), float64(tl.takes)/tl.elapsed.Seconds(),
			len(tl.failingKeys), r.keys, r.victimKeys(), tl.failed, tl.takes, tl.nodeDown, cost.Round(100*time.Nanosecond), tl.causes)
	}
}

// state describes the current phase, for a failure's message.
func (r *killRun) state() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	tl := r.tally[r.phase]
	return fmt.Sprintf("phase %s: %d takes, %d failed, causes %v, on live masters %v", killPhases[r.phase], tl.takes, tl.failed, tl.causes, tl.otherCauses)
}

// waitFor polls cond for up to limit.
func (r *killRun) waitFor(limit time.Duration, what string, cond func() bool) time.Duration {
	t := r.t
	t.Helper()
	t0 := time.Now()
	for !cond() {
		if time.Since(t0) > limit {
			t.Fatalf("%s: not within %v (%s)", what, limit, r.state())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(t0)
}

// clusterStateOK reports whether every running node says cluster_state:ok.
func (c *redisCluster) clusterStateOK() bool {
	for _, n := range c.alive() {
		cl := n.client()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := cl.ClusterInfo(ctx).Result()
		cancel()
		cl.Close()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			return false
		}
	}
	return true
}

// TestClusterDeadMasterCostsItsOwnKeys protects what the README promises
// of a cluster whose master dies, three masters without replicas:
//
//   - with cluster-require-full-coverage no, only the dead master's keys
//     fail; after NodeFailures failures in a row they fail at once
//     (node-down) instead of waiting out the budget, every other key
//     decides throughout, and once the master is back its keys decide
//     again within about the node break;
//   - with the default (full coverage required), the other masters stop
//     serving too once they mark the master failed (cluster-down) — the
//     reason the README asks for replicas or full coverage off — and all
//     keys decide again once it is back.
//
// With RESILIENCE_REDIS_CONTRAST set it also runs the first case with
// the node breaker off (every failing take waits out its budget), the
// contrast of BENCHMARKS.md.
func TestClusterDeadMasterCostsItsOwnKeys(t *testing.T) {
	type killCase struct {
		name      string
		replicas  int
		coverage  string
		nodeBreak time.Duration
		retried   bool // go-redis retries within the budget, as before
	}
	cases := []killCase{
		{"coverage-no", 0, "no", 0, false},
		{"coverage-yes", 0, "yes", 0, false},
		{"replicas-coverage-no", 1, "no", 0, false},
	}
	// Phases of 1 s before and after, the master dead 3 s (restarted
	// then); 2 s and 4 s for the measured run of BENCHMARKS.md.
	steady, dead := time.Second, 3*time.Second
	if os.Getenv("RESILIENCE_REDIS_CONTRAST") != "" {
		steady, dead = 2*time.Second, 4*time.Second
		cases = append(cases,
			killCase{"coverage-no-node-breaker-off", 0, "no", -1, false},
			killCase{"coverage-no-as-before", 0, "no", -1, true})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startClusterOf(t, tc.replicas, "--cluster-require-full-coverage", tc.coverage)
			// A budget a live master answers within on a loaded 2-core
			// machine under the race detector; a killed master refuses
			// connections at once, so the kill's cost does not depend on it.
			const budget = 250 * time.Millisecond
			var logs syncBuffer
			store, err := New(Options{Client: c.Client(), Prefix: "kill:", Budget: budget, NodeBreak: tc.nodeBreak,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			store.retried = tc.retried
			r := newKillRun(t, c, store, 24)
			if n := r.victimKeys(); n == 0 || n == r.keys {
				t.Fatalf("%d of %d keys on the victim", n, r.keys)
			}
			r.run(6)
			time.Sleep(steady)
			r.next()
			r.victim.kill()
			killed := time.Now()
			if tc.coverage == "yes" {
				// The other masters mark it failed after the node timeout,
				// and the whole cluster stops serving.
				r.waitFor(20*time.Second, "other masters' keys failing with cluster-down", func() bool {
					r.mu.Lock()
					defer r.mu.Unlock()
					return r.tally[1].otherCauses[ratelimit.StoreClusterDown] > 0
				})
				t.Logf("%s: other masters' keys failed with cluster-down %v after the kill", tc.name, time.Since(killed).Round(time.Millisecond))
			}
			var restarted time.Time
			if tc.replicas > 0 {
				// Its replica takes over: no restart.
				r.waitFor(30*time.Second, "the replica to take over", func() bool { return c.healthAfterFailover() == "" })
				t.Logf("%s: the replica served the slots %v after the kill", tc.name, time.Since(killed).Round(10*time.Millisecond))
				restarted = killed
			} else {
				for time.Since(killed) < dead {
					time.Sleep(50 * time.Millisecond)
				}
				if err := r.victim.start(); err != nil {
					t.Fatalf("restart the killed master: %v", err)
				}
				restarted = time.Now()
			}
			r.waitFor(30*time.Second, "the cluster ok again", c.clusterStateOK)
			// Recovery: the killed master's keys decide again, a stretch of
			// one second with no failure.
			r.waitFor(30*time.Second, "the killed master's keys decided again", func() bool { return r.sinceVictimFailed() > time.Second })
			recovered := time.Since(restarted) - time.Second
			r.next()
			time.Sleep(steady)
			r.end()
			r.report(tc.name)
			t.Logf("%s: keys decided again %v after the restart (with a replica: after the kill)", tc.name, recovered.Round(10*time.Millisecond))

			before, during, after := r.tally[0], r.tally[1], r.tally[2]
			// Without a dead master, failures are the loaded machine's
			// noise (see below): at most 1 % of a phase's takes.
			if before.failed*100 > before.takes {
				t.Errorf("%d of %d takes failed before the kill", before.failed, before.takes)
			}
			if after.failed*100 > after.takes {
				t.Errorf("%d of %d takes failed after the recovery", after.failed, after.takes)
			}
			if during.failed == 0 {
				t.Fatal("no take failed while a master was dead")
			}
			switch {
			case tc.coverage == "no":
				// A dead master costs its own keys only.
				// A live master's take can miss its budget on a
				// loaded 2-core machine (race detector, other packages'
				// tests beside it), and its breaker then opens for a
				// probe: up to 1 % of their takes is that noise. A dead
				// master's cost reaching the others would fail most of
				// theirs, as coverage-yes does.
				if during.otherFailed*100 > during.otherTakes {
					t.Errorf("%d of %d takes of keys on live masters failed (%v), want at most 1 %%", during.otherFailed, during.otherTakes, during.otherCauses)
				} else if during.otherFailed != 0 {
					t.Logf("%d of %d takes of keys on live masters failed (%v): load noise", during.otherFailed, during.otherTakes, during.otherCauses)
				}
				if tc.nodeBreak >= 0 {
					if during.nodeDown*2 < during.failed {
						t.Errorf("%d of %d failures were at once (node-down), want most", during.nodeDown, during.failed)
					}
					// With a replica, the old master's breaker stays open:
					// its slots have moved to another node.
					if !strings.Contains(logs.String(), "stopped answering") || (tc.replicas == 0 && !strings.Contains(logs.String(), "answers again")) {
						t.Errorf("store's log: %q, want the node down and back", logs.String())
					}
				}
			default:
				if during.otherFailed == 0 {
					t.Error("no key of a live master failed with full coverage required")
				}
			}
			for reason := range during.causes {
				switch reason {
				case ratelimit.StoreTimeout, ratelimit.StoreConnectionRefused, ratelimit.StoreClusterDown, ratelimit.StoreNodeDown, ratelimit.StoreRedirect:
				default:
					t.Errorf("cause %q of a dead master's failures (all %v)", reason, during.causes)
				}
			}
		})
	}
}

func (n *clusterNode) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
}
