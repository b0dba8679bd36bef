package fair

import (
	"runtime"
	"strconv"
	"testing"
)

// churn runs distinct flows through a table the way a saturated limiter
// does: limit permits always held and queued waiters always waiting, each
// new waiter of a flow never seen before, each grant releasing the oldest
// permit first.
func churn(tab *Table[int], lv *Level[int], from, to, limit, queued int) {
	var inFlight []*Flow[int]
	nodes := make([]Node[int], to-from)
	for i := from; i < to; i++ {
		lv.Push(&nodes[i-from], strconv.Itoa(i), 1)
		if lv.Len() < queued {
			continue
		}
		if len(inFlight) == limit {
			tab.Release(inFlight[0])
			inFlight = inFlight[1:]
		}
		inFlight = append(inFlight, Grant(lv.Best()))
	}
	for _, f := range inFlight {
		tab.Release(f)
	}
	for lv.Len() > 0 {
		Remove(lv.Best())
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoryFlatOverManyFlows (invariant 6, memory bounded by the limits,
// not by traffic): 100,000 distinct flows through a saturated table leave
// its memory where 1,000 left it, and no flow behind.
func TestMemoryFlatOverManyFlows(t *testing.T) {
	if testing.Short() {
		t.Skip("memory measurement")
	}
	var tab Table[int]
	lv := tab.NewLevel()
	const limit, queued = 100, 100
	churn(&tab, lv, 0, 1000, limit, queued)
	// A steady state that never empties keeps the map: churn within it.
	keep := tab.Hold("steady", 1)
	churn(&tab, lv, 1000, 2000, limit, queued)
	before := heapInUse()
	churn(&tab, lv, 2000, 102000, limit, queued)
	after := heapInUse()
	if tab.Active() != 1 || lv.Len() != 0 {
		t.Fatalf("after the churn: %d flows active, %d queued; want only the steady flow", tab.Active(), lv.Len())
	}
	const slack = 256 << 10
	if after > before+slack {
		t.Errorf("heap grew from %d to %d bytes over 100,000 distinct flows (slack %d)", before, after, slack)
	}
	t.Logf("heap %d bytes after 1,000 flows, %d after 101,000", before, after)
	tab.Release(keep)
	if tab.Active() != 0 || tab.flows != nil {
		t.Fatalf("an empty table keeps %d flows (map %v)", tab.Active(), tab.flows != nil)
	}
}
