package resilienceredis

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ylcnfrht/resilience/core/ratelimit"
	"pgregory.net/rapid"
)

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
		alg := rapid.SampledFrom([]ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.TokenBucket}).Draw(rt, "alg")
		p := ratelimit.Policy{
			Name: "cost", Algorithm: alg,
			Limit:  rapid.IntRange(1, 30).Draw(rt, "limit"),
			Window: time.Duration(rapid.Int64Range(int64(10*time.Second/time.Microsecond), int64(time.Hour/time.Microsecond)).Draw(rt, "windowµs")) * time.Microsecond,
		}
		steps := sequence(rapid.Uint64().Draw(rt, "seed"), p, rapid.IntRange(1, 3).Draw(rt, "keys"), rapid.IntRange(1, 60).Draw(rt, "takes"))
		costs := make([]int, len(steps))
		for i := range costs {
			costs[i] = rapid.IntRange(0, p.Limit+2).Draw(rt, "cost")
		}

		var want []ratelimit.Decision
		synctest.Test(t, func(t *testing.T) {
			mem := ratelimit.NewMemoryStore(0)
			for i, st := range steps {
				time.Sleep(st.gap)
				d, err := mem.TakeN(context.Background(), st.key, p, costs[i])
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, d)
			}
		})
		store, err := New(Options{Client: client, Prefix: fmt.Sprintf("cost%d:", run.Add(1)), Budget: 5 * time.Second})
		if err != nil {
			rt.Fatal(err)
		}
		var _ ratelimit.CostStore = store
		now := int64(1_700_000_000_000_000)
		store.clockArg = func() string { return strconv.FormatInt(now, 10) }
		for i, st := range steps {
			now += int64(st.gap / time.Microsecond)
			got, err := store.TakeN(context.Background(), st.key, p, costs[i])
			if err != nil {
				rt.Fatal(err)
			}
			if got != want[i] {
				rt.Fatalf("take %d of cost %d (%s after %v): redis %+v, memory %+v", i, costs[i], st.key, st.gap, got, want[i])
			}
		}
	})
}
