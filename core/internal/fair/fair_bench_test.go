package fair

import (
	"fmt"
	"strconv"
	"testing"
)

// BenchmarkQueuedCycle is a saturated limiter's queue path with n flows
// active: each operation releases a permit, grants the best waiter and
// queues a new waiter for the released flow. The cost should grow with
// log n (compare the sub-benchmarks' ns/op).
func BenchmarkQueuedCycle(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("flows=%d", n), func(b *testing.B) {
			var tab Table[int]
			lv := tab.NewLevel()
			keys := make([]string, n)
			held := make([]*Flow[int], 0, n)
			nodes := make([]Node[int], 2*n)
			free := make([]*Node[int], 0, 2*n)
			for i := range nodes {
				free = append(free, &nodes[i])
			}
			for i := range keys {
				keys[i] = strconv.Itoa(i)
				held = append(held, tab.Hold(keys[i], 1+i%3))
				nd := free[len(free)-1]
				free = free[:len(free)-1]
				lv.Push(nd, keys[i], 1+i%3)
			}
			x := uint64(1)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				i := int(x % uint64(len(held)))
				f := held[i]
				key := f.Key()
				tab.Release(f)
				best := lv.Best()
				held[i] = Grant(best)
				free = append(free, best)
				nd := free[len(free)-1]
				free = free[:len(free)-1]
				lv.Push(nd, key, 1)
			}
		})
	}
}
