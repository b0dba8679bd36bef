package resilienceredis

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ylcnfrht/resilience/core/ratelimit"
	"pgregory.net/rapid"
)

// Redis's Store takes costly requests.
var _ ratelimit.CostStore = (*Store)(nil)

// TestTakeNSameNumbersAsMemoryStoreRapid extends the store's promise to
// costly requests: for the same sequence of takes of random cost (0 to
// above the limit) at the same instants, Redis's TakeN (N taken in the one
// script, all or none) gives the in-memory store's decision, remaining,
// reset and retry-after, for every algorithm.
func TestTakeNSameNumbersAsMemoryStoreRapid(t *testing.T) {
	srv := startRedis(t)
	client := srv.Client()
	var run atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		p, steps := drawSequence(rt, "cost", 30)
		costs := make([]int, len(steps))
		for i := range costs {
			costs[i] = rapid.IntRange(0, p.Limit+2).Draw(rt, "cost")
		}
		sideBySide(t, rt.Fatalf, client, fmt.Sprintf("cost%d:", run.Add(1)), 1_700_000_000_000_000, p, steps, costs)
	})
}
