package fair

import (
	"fmt"
	"testing"
	"time"
)

// TestSparedByDemand: Spared exempts a flow only while it asks for less
// than half of what the heaviest flow asks (per weight) and had no waiter
// shed within the interval. Every row feeds a table windows of requests
// in a fixed proportion between flows and reads Spared for flow "0".
func TestSparedByDemand(t *testing.T) {
	const interval = 100 * time.Millisecond
	now := time.Unix(0, 0)
	for _, c := range []struct {
		name    string
		asks    []int // requests per round, per flow; flow "0" first
		weights []int // nil: 1 each
		shed    bool  // a waiter of flow "0" was shed just now
		want    bool
	}{
		{"every flow asks alike", []int{8, 8, 8, 8, 8, 8, 8, 8, 8, 8}, nil, false, false},
		{"quiet beside a noisy flow", []int{4, 60, 4, 4, 4, 4, 4, 4, 4, 4}, nil, false, true},
		{"quiet flow shed within the interval", []int{4, 60, 4, 4, 4, 4, 4, 4, 4, 4}, nil, true, false},
		{"the noisy flow", []int{60, 4, 4, 4, 4, 4, 4, 4, 4, 4}, nil, false, false},
		{"just over half the heaviest", []int{5, 9}, nil, false, false},
		{"just under half the heaviest", []int{4, 9}, nil, false, true},
		{"heavy but with a weight to match", []int{8, 8}, []int{4, 1}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tb Table[int]
			lv := tb.NewLevel()
			weight := func(i int) int {
				if c.weights == nil {
					return 1
				}
				return c.weights[i]
			}
			// Hold one permit per flow so that every flow stays active,
			// then ask in rounds for several windows.
			for i := range c.asks {
				tb.Hold(fmt.Sprint(i), weight(i))
			}
			for range 3 * windowPerFlow * 8 {
				for i, n := range c.asks {
					for range n {
						nd := &Node[int]{}
						lv.Push(nd, fmt.Sprint(i), weight(i))
						Remove(nd)
					}
				}
			}
			if c.shed {
				tb.ShedKey("0", now, 100)
			}
			if got := tb.Spared("0", now, interval); got != c.want {
				t.Errorf("Spared = %v, want %v", got, c.want)
			}
			// An interval after the shed only the demand counts.
			if got := tb.Spared("0", now.Add(interval), interval); got != (c.want || c.shed) {
				t.Errorf("an interval later, Spared = %v, want %v", got, c.want || c.shed)
			}
		})
	}
}

// TestSparedNewFlow: before any window of requests has closed every flow
// is spared; after, a flow with nothing counted is not (its newcomer
// would be its only request), and a flow active for less than a window is
// judged by its share of the requests since it became active.
func TestSparedNewFlow(t *testing.T) {
	now := time.Unix(0, 0)
	var tb Table[int]
	lv := tb.NewLevel()
	ask := func(key string) {
		nd := &Node[int]{}
		lv.Push(nd, key, 1)
		Remove(nd)
	}
	tb.Hold("noisy", 1)
	if !tb.Spared("new", now, time.Millisecond) {
		t.Error("before any window closed: a new flow is not spared")
	}
	for range windowPerFlow * 8 {
		ask("noisy")
	}
	if tb.Spared("new", now, time.Millisecond) {
		t.Error("after a window: a flow with nothing counted is spared")
	}
	tb.Hold("quiet", 1)
	for range 4 {
		for range 20 {
			ask("noisy")
		}
		ask("quiet")
	}
	if !tb.Spared("quiet", now, time.Millisecond) {
		t.Error("a new flow asking 1 in 21 requests is not spared")
	}
	tb.Hold("heavy", 1)
	for range 10 {
		ask("noisy")
		ask("heavy")
	}
	if tb.Spared("heavy", now, time.Millisecond) {
		t.Error("a new flow asking as much as the heaviest is spared")
	}
}
