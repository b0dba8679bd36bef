package resilienceredis

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ylcnfrht/resilience/core/ratelimit"
)

const (
	// DefaultNodeBreak is how long the keys of a cluster node that stopped
	// answering fail at once, between probes, when Options.NodeBreak is 0.
	DefaultNodeBreak = time.Second
	// NodeFailures is how many takes in a row must fail on a node (no
	// answer within the budget, a refused connection, CLUSTERDOWN) before
	// its keys fail at once.
	NodeFailures = 3
)

// ErrNodeDown reports that the cluster node serving the key stopped
// answering lately, so the take failed at once without trying it (see
// Options.NodeBreak). Take's error matches it with errors.Is; its cause
// is ratelimit.StoreNodeDown.
var ErrNodeDown = errors.New("resilienceredis: the key's cluster node stopped answering; its keys fail at once until a probe gets through")

// nodes is the health of each cluster master the store has sent takes
// to, by address: a breaker per node, so a dead master costs its own
// keys a fast failure each, and no other key anything.
type nodes struct {
	brk    time.Duration
	log    *slog.Logger
	byAddr sync.Map // string → *node
}

// node is one master's breaker: closed (down == 0), open until down (ns
// since the Unix epoch), or half-open with one probe running.
type node struct {
	addr     string
	failures atomic.Int32 // consecutive node failures
	down     atomic.Int64
	probing  atomic.Bool
}

func (ns *nodes) get(addr string) *node {
	if n, ok := ns.byAddr.Load(addr); ok {
		return n.(*node)
	}
	n, _ := ns.byAddr.LoadOrStore(addr, &node{addr: addr})
	return n.(*node)
}

// admit says whether a take may try the node now, and whether it is the
// probe of an open breaker.
func (n *node) admit(now int64) (ok, probe bool) {
	d := n.down.Load()
	if d == 0 {
		return true, false
	}
	if now < d || !n.probing.CompareAndSwap(false, true) {
		return false, false
	}
	return true, true
}

// done records how a take the node admitted ended: reason "" for a
// decision.
func (ns *nodes) done(ctx context.Context, n *node, probe bool, reason ratelimit.StoreReason) {
	if !isNodeFailure(reason) {
		if reason == ratelimit.StoreCanceled {
			// The caller left: it says nothing of the node.
			if probe {
				n.probing.Store(false)
			}
			return
		}
		n.failures.Store(0)
		if n.down.Swap(0) != 0 {
			ns.log.LogAttrs(ctx, slog.LevelInfo, "resilienceredis: cluster node answers again; its keys are decided again",
				slog.String("node", n.addr))
		}
		if probe {
			n.probing.Store(false)
		}
		return
	}
	now := time.Now().UnixNano()
	if probe {
		n.down.Store(now + int64(ns.brk))
		n.probing.Store(false)
		return
	}
	if n.failures.Add(1) >= NodeFailures && n.down.CompareAndSwap(0, now+int64(ns.brk)) {
		ns.log.LogAttrs(ctx, slog.LevelWarn, "resilienceredis: cluster node stopped answering; its keys fail at once between probes",
			slog.String("node", n.addr), slog.String("cause", string(reason)), slog.Duration("break", ns.brk))
	}
}
