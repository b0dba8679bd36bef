package resilienceredis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// redisCluster is a Redis Cluster of the test's own on loopback: three
// masters with one replica each, made by redis-cli --cluster create from
// six redis-server processes, without persistence, with a one-second node
// timeout so that a killed master fails over within seconds.
type redisCluster struct {
	tb       testing.TB
	nodes    []*clusterNode
	replicas int // per master
}

// clusterNode is one redis-server of a cluster.
type clusterNode struct {
	port     int
	bin      string
	args     []string // to restart it as it was
	cmd      *exec.Cmd
	waitExit chan error
}

func (n *clusterNode) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// clusterNodeTimeout is the cluster's node timeout: how long a master may
// be silent before its replica takes over.
const clusterNodeTimeout = time.Second

// startCluster starts a cluster for tb and stops it when tb ends. Without
// the binaries it skips, or fails when CI is set: CI must run every
// cluster test.
func startCluster(tb testing.TB) *redisCluster {
	tb.Helper()
	return startClusterOf(tb, 1)
}

// startClusterOf starts a cluster of three masters with replicas replicas
// each, every node started with the extra server arguments args.
func startClusterOf(tb testing.TB, replicas int, args ...string) *redisCluster {
	tb.Helper()
	var bins [2]string
	for i, name := range []string{"redis-server", "redis-cli"} {
		bin, err := exec.LookPath(name)
		if err != nil {
			if os.Getenv("CI") != "" {
				tb.Fatalf("%s not found and CI is set; install it with: %s", name, installHint)
			}
			tb.Skipf("%s not found; install it with: %s", name, installHint)
		}
		bins[i] = bin
	}
	c := &redisCluster{tb: tb, replicas: replicas}
	tb.Cleanup(c.stop)
	dir := tb.TempDir()
	for range 3 * (1 + replicas) {
		n, err := startClusterNode(tb, bins[0], dir, args...)
		if err != nil {
			tb.Fatalf("start a cluster node: %v", err)
		}
		c.nodes = append(c.nodes, n)
	}
	create := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		create = append(create, n.Addr())
	}
	create = append(create, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(bins[1], create...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitHealthy()
	return c
}

// startClusterNode starts one cluster-enabled server on free loopback
// ports (its client port and its cluster bus port), retrying a few times
// in case a port picked by the kernel was taken again.
func startClusterNode(tb testing.TB, bin, dir string, extra ...string) (*clusterNode, error) {
	var err error
	for range 5 {
		n := &clusterNode{port: freePort(tb), bin: bin}
		bus := freePort(tb)
		n.args = append([]string{
			"--port", strconv.Itoa(n.port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", fmt.Sprintf("%s/nodes-%d.conf", dir, n.port),
			"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout / time.Millisecond)),
			// A replica fails over however long it was cut off.
			"--cluster-replica-validity-factor", "0",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--daemonize", "no", "--loglevel", "warning"}, extra...)
		if err = n.start(); err == nil {
			return n, nil
		}
	}
	return nil, err
}

// start runs the node's server with its arguments (again, after kill:
// same ports, same cluster configuration file, no data).
func (n *clusterNode) start() error {
	n.cmd = exec.Command(n.bin, n.args...)
	if err := n.cmd.Start(); err != nil {
		n.cmd = nil
		return err
	}
	n.waitExit = make(chan error, 1)
	go func() { n.waitExit <- n.cmd.Wait() }()
	if err := waitPing(n); err != nil {
		n.kill()
		return err
	}
	return nil
}

func waitPing(n *clusterNode) error {
	c := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-n.waitExit:
			n.waitExit <- err
			return fmt.Errorf("redis-server exited: %v", err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server not answering: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill ends the node at once (SIGKILL): a crashed master.
func (n *clusterNode) kill() {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.waitExit
	n.cmd = nil
}

func (c *redisCluster) stop() {
	for _, n := range c.nodes {
		n.kill()
	}
}

// alive returns the nodes still running.
func (c *redisCluster) alive() []*clusterNode {
	var out []*clusterNode
	for _, n := range c.nodes {
		if n.cmd != nil {
			out = append(out, n)
		}
	}
	return out
}

// waitHealthy waits until every running node reports the cluster ok,
// every slot served, and every master has an online replica (so a
// master killed next can fail over).
func (c *redisCluster) waitHealthy() {
	c.tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		problem := c.health()
		if problem == "" {
			return
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("cluster not healthy: %s", problem)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// health is "" for a healthy cluster, or what is wrong with it.
func (c *redisCluster) health() string {
	masters := 0
	for _, n := range c.alive() {
		info, repl, err := n.infos()
		if err != nil {
			return fmt.Sprintf("%s: %v", n.Addr(), err)
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
			return fmt.Sprintf("%s: cluster info %q", n.Addr(), info)
		}
		if strings.Contains(repl, "role:master") {
			masters++
			if c.replicas > 0 && !strings.Contains(repl, "state=online") {
				return fmt.Sprintf("%s: master without an online replica", n.Addr())
			}
		}
	}
	if masters != 3 {
		return fmt.Sprintf("%d masters, want 3", masters)
	}
	return ""
}

// infos asks node n, within a second, for its CLUSTER INFO and its INFO
// replication section.
func (n *clusterNode) infos() (info, repl string, err error) {
	cl := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if info, err = cl.ClusterInfo(ctx).Result(); err != nil {
		return "", "", err
	}
	repl, err = cl.Info(ctx, "replication").Result()
	return info, repl, err
}

// Client returns a cluster client that bounds its waits by the context's
// deadline (as the package documentation asks), closed when the test
// ends.
func (c *redisCluster) Client() *redis.ClusterClient {
	var addrs []string
	for _, n := range c.alive() {
		addrs = append(addrs, n.Addr())
	}
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	c.tb.Cleanup(func() { cl.Close() })
	return cl
}

// masterOf returns the node serving key's slot as master.
func (c *redisCluster) masterOf(key string) *clusterNode {
	c.tb.Helper()
	slot := redisClusterSlot(key)
	for _, n := range c.alive() {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		shards, err := cl.ClusterShards(ctx).Result()
		cancel()
		cl.Close()
		if err != nil {
			continue
		}
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if int64(slot) < r.Start || int64(slot) > r.End {
					continue
				}
				for _, nd := range sh.Nodes {
					if nd.Role != "master" || nd.Health != "online" {
						continue
					}
					for _, m := range c.nodes {
						if m.port == int(nd.Port) {
							return m
						}
					}
				}
			}
		}
	}
	c.tb.Fatalf("no master found for %q (slot %d)", key, slot)
	return nil
}

// redisClusterSlot is Redis Cluster's hash slot of key: CRC16 (XMODEM) of
// the key, or of its hash tag (the part between the first { and the next
// }, when not empty), modulo 16384.
func redisClusterSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// TestClusterKeyScriptRunsOnOneSlot protects the store's use of a
// cluster: each decision is one script on one key, so it runs on the
// master of that key's slot and its state lives there alone; keys spread
// over the masters; and a hash tag in a rate-limit key keeps its policy's
// keys together on one slot.
func TestClusterKeyScriptRunsOnOneSlot(t *testing.T) {
	c := startCluster(t)
	client := c.Client()
	store, err := New(Options{Client: client, Prefix: "slot:", Budget: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p := ratelimit.Policy{Name: "api", Limit: 10, Window: time.Hour}
	ctx := context.Background()
	masters := map[string]bool{}
	for i := range 30 {
		key := "client-" + strconv.Itoa(i)
		for range 3 {
			if _, err := store.Take(ctx, key, p); err != nil {
				t.Fatal(err)
			}
		}
		rk := store.key(key, p)
		if want, err := client.ClusterKeySlot(ctx, rk).Result(); err != nil || int(want) != redisClusterSlot(rk) {
			t.Fatalf("slot of %q: CLUSTER KEYSLOT %d (%v), computed %d", rk, want, err, redisClusterSlot(rk))
		}
		owner := c.masterOf(rk)
		masters[owner.Addr()] = true
		direct := redis.NewClient(&redis.Options{Addr: owner.Addr()})
		n, err := direct.HGet(ctx, rk, "b").Int()
		direct.Close()
		if err != nil || n != 3 {
			t.Fatalf("%q on its slot's master %s: count %d (%v), want the 3 takes", rk, owner.Addr(), n, err)
		}
	}
	if len(masters) != 3 {
		t.Errorf("30 keys on %d masters, want all 3", len(masters))
	}
	// A hash tag in the rate-limit key decides the slot: the policies'
	// keys of one tagged client share it.
	q := ratelimit.Policy{Name: "search", Limit: 10, Window: time.Minute, Algorithm: ratelimit.TokenBucket}
	a, b := store.key("{tenant-7}:alice", p), store.key("{tenant-7}:bob", q)
	if redisClusterSlot(a) != redisClusterSlot(b) {
		t.Fatalf("%q and %q on slots %d and %d", a, b, redisClusterSlot(a), redisClusterSlot(b))
	}
	for _, k := range []string{"{tenant-7}:alice", "{tenant-7}:bob"} {
		if _, err := store.Take(ctx, k, q); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClusterMasterKilledMidRun protects what the package documentation
// promises when a cluster master crashes under load: no Take outlives its
// budget by more than scheduling slack; while the master's slots have no
// server, the limiter fails open or closed as configured (with its event)
// and other slots keep deciding; the replica takes over and decisions
// resume on their own; and the only decisions lost are takes the old
// master acknowledged and had not yet replicated, at most those of its
// last moments.
func TestClusterMasterKilledMidRun(t *testing.T) {
	c := startCluster(t)
	client := c.Client()
	const budget = 200 * time.Millisecond
	const slack = 1500 * time.Millisecond
	store, err := New(Options{Client: client, Prefix: "failover:", Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	var events [2]atomic.Int64 // store-error events: fail-open, fail-closed
	listener := event.ListenerFunc(func(_ context.Context, e event.Event) {
		if e.Name != event.RateLimiterStoreError {
			return
		}
		switch e.Reason {
		case "fail-open":
			events[0].Add(1)
		case "fail-closed":
			events[1].Add(1)
		}
	})
	var limiters [2]*resilience.RateLimiter
	var tels [2]resilience.Telemetry
	for i, closed := range []bool{false, true} {
		limiters[i], err = resilience.NewRateLimiter(resilience.RateLimiterOptions{
			Name: "failover", PermitLimit: 1_000_000, Window: time.Hour, Store: store, FailClosed: closed,
			Key: func(ctx context.Context) string { return ctx.Value(keyCtx{}).(string) },
		})
		if err != nil {
			t.Fatal(err)
		}
		tels[i] = resilience.NewTelemetry("failover", "rate", listener)
	}
	p := limiters[0].Policy()

	const keys = 24
	victimKey := "k0"
	victim := c.masterOf(store.key(victimKey, p))
	onVictim := map[string]bool{}
	for k := range keys {
		key := "k" + strconv.Itoa(k)
		onVictim[key] = c.masterOf(store.key(key, p)) == victim
	}

	// acked[k] lists when each take decided by Redis for key k returned
	// (ns since start); failed counts store failures by limiter.
	type tally struct {
		mu      sync.Mutex
		acked   [keys][]int64
		failedK [keys]int // store failures per key
		decided [2]int64
		failed  [2]int64
		denied  int64 // fail-closed refusals
		slowest time.Duration
		bad     []string
		lastErr [2]time.Time
	}
	var tl tally
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range 6 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := int(seq.Add(1))
				k, i := n%keys, (n/keys)%2
				ctx := context.WithValue(context.Background(), keyCtx{}, "k"+strconv.Itoa(k))
				t0 := time.Now()
				d, err := limiters[i].Take(ctx, tels[i])
				took := time.Since(t0)
				tl.mu.Lock()
				tl.slowest = max(tl.slowest, took)
				if took > budget+slack {
					tl.bad = append(tl.bad, fmt.Sprintf("a take took %v (budget %v)", took, budget))
				}
				var se *resilience.RateLimitStoreError
				switch {
				case err == nil && d.Allowed:
					tl.acked[k] = append(tl.acked[k], int64(time.Since(start)))
					tl.decided[i]++
				case errors.As(err, &se):
					tl.failed[i]++
					tl.failedK[k]++
					tl.lastErr[i] = time.Now()
					if d.Allowed == (i == 1) {
						tl.bad = append(tl.bad, fmt.Sprintf("limiter %d (fail-closed %v) answered allowed=%v on a store failure", i, i == 1, d.Allowed))
					}
					if i == 1 {
						tl.denied++
					}
					if !onVictim["k"+strconv.Itoa(k)] && time.Since(killedAt()) > 10*clusterNodeTimeout {
						tl.bad = append(tl.bad, fmt.Sprintf("key k%d, not on the killed master, failed long after the kill: %v", k, err))
					}
				default:
					tl.bad = append(tl.bad, fmt.Sprintf("take: allowed %v, error %v", d.Allowed, err))
				}
				tl.mu.Unlock()
			}
		})
	}
	snapshot := func() (decided, failed [2]int64) {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		return tl.decided, tl.failed
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				d, f := snapshot()
				t.Fatalf("%s: not within 45 s (decided %v, failed %v)", what, d, f)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitUntil("decisions before the kill", func() bool { d, _ := snapshot(); return d[0] >= 200 && d[1] >= 200 })
	victim.kill()
	killAt := time.Now()
	setKilledAt(killAt)
	waitUntil("store failures on the killed master's slots", func() bool { _, f := snapshot(); return f[0] >= 1 && f[1] >= 1 })
	waitUntil("the replica to take over", func() bool {
		if c.healthAfterFailover() == "" {
			return true
		}
		time.Sleep(100 * time.Millisecond)
		return false
	})
	t.Logf("failover run: the cluster served every slot again %v after the kill", time.Since(killAt).Round(time.Millisecond))
	// Decisions resume by themselves once the replica has taken over:
	// wait for a stretch of 2 s with no failure on either limiter.
	waitUntil("decisions resumed after the failover", func() bool {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		last := tl.lastErr[0]
		if tl.lastErr[1].After(last) {
			last = tl.lastErr[1]
		}
		return time.Since(last) > 2*time.Second
	})
	close(stop)
	wg.Wait()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, b := range tl.bad {
		t.Error(b)
	}
	if len(tl.bad) > 0 {
		t.FailNow()
	}
	lastFailure := tl.lastErr[0]
	if tl.lastErr[1].After(lastFailure) {
		lastFailure = tl.lastErr[1]
	}

	// What the surviving cluster counted for each key, against the takes
	// Redis acknowledged: a key can only have lost takes its old master
	// acknowledged in the last moments before the kill.
	killNs := int64(killAt.Sub(start))
	var lost, lastSecond, total int
	for k := range keys {
		key := "k" + strconv.Itoa(k)
		d, err := store.Take(context.Background(), key, p)
		if err != nil {
			t.Fatalf("final take for %s: %v", key, err)
		}
		stored := p.Limit - d.Remaining - 1 // the final take counted itself
		acked := len(tl.acked[k])
		total += acked
		if stored > acked+tl.failedK[k] {
			// A take that failed at its budget may have run in Redis all
			// the same (its reply came too late): at most those.
			t.Errorf("%s: the cluster counted %d takes, more than the %d acknowledged and %d failed", key, stored, acked, tl.failedK[k])
		}
		if missing := acked - stored; missing > 0 {
			if !onVictim[key] {
				t.Errorf("%s: %d acknowledged takes lost on a master that did not fail", key, missing)
			}
			recent := 0
			for _, at := range tl.acked[k] {
				if at > killNs-int64(time.Second) && at <= killNs {
					recent++
				}
			}
			if missing > recent {
				t.Errorf("%s: %d acknowledged takes lost, more than the %d of the last second before the kill", key, missing, recent)
			}
			lost += missing
			lastSecond += recent
		}
	}
	onVictimKeys := 0
	for _, v := range onVictim {
		if v {
			onVictimKeys++
		}
	}
	t.Logf("failover run: %d keys (%d on the killed master %s); %d takes decided by Redis (%d fail-open limiter, %d fail-closed), %d store failures (%d fail-open answered allowed, %d fail-closed refused), events %d fail-open / %d fail-closed",
		keys, onVictimKeys, victim.Addr(), total, tl.decided[0], tl.decided[1], tl.failed[0]+tl.failed[1], tl.failed[0], tl.denied, events[0].Load(), events[1].Load())
	t.Logf("failover run: failures from the kill until %v after it; slowest take %v (budget %v); acknowledged takes lost in the failover: %d", lastFailure.Sub(killAt).Round(time.Millisecond), tl.slowest.Round(time.Millisecond), budget, lost)
	if events[0].Load() != tl.failed[0] || events[1].Load() != tl.failed[1] {
		t.Errorf("store-error events %d/%d, want one per failure (%d/%d)", events[0].Load(), events[1].Load(), tl.failed[0], tl.failed[1])
	}
	if err := c.healthAfterFailover(); err != "" {
		t.Errorf("after the failover: %s", err)
	}
}

// keyCtx carries the rate-limit key of a take in the failover test.
type keyCtx struct{}

var killed atomic.Int64 // ns since the epoch of the kill; 0 before it

func setKilledAt(t time.Time) { killed.Store(t.UnixNano()) }

// killedAt is when the failover test killed its master, or far in the
// future before it did.
func killedAt() time.Time {
	if ns := killed.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Now().Add(time.Hour)
}

// healthAfterFailover is "" once the running nodes serve every slot with
// three masters (the promoted replica among them), or what is wrong.
func (c *redisCluster) healthAfterFailover() string {
	masters := 0
	for _, n := range c.alive() {
		info, repl, err := n.infos()
		if err != nil {
			return fmt.Sprintf("%s: %v", n.Addr(), err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Sprintf("%s: cluster info %q", n.Addr(), info)
		}
		if strings.Contains(repl, "role:master") {
			masters++
		}
	}
	if masters != 3 {
		return fmt.Sprintf("%d masters, want 3", masters)
	}
	return ""
}
