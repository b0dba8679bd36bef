package fair

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// mWaiter is a waiter as the model sees it.
type mWaiter struct {
	id    int
	key   string
	level int
	node  *Node[int]
}

// model is an obviously correct description of a Table: flows with
// their weight and held permits, and every waiter in arrival order.
type model struct {
	weight  map[string]int64
	held    map[string]int
	turn    map[string]uint64
	seq     uint64
	waiters []*mWaiter // arrival order
}

func (m *model) active(key string) bool {
	if m.held[key] > 0 {
		return true
	}
	for _, w := range m.waiters {
		if w.key == key {
			return true
		}
	}
	return false
}

func (m *model) touch(key string, weight int) {
	if !m.active(key) {
		m.seq++
		m.weight[key] = clampWeight(weight)
		m.turn[key] = m.seq
		delete(m.held, key)
	}
}

func (m *model) removeWaiter(w *mWaiter) {
	for i, x := range m.waiters {
		if x == w {
			m.waiters = append(m.waiters[:i], m.waiters[i+1:]...)
			return
		}
	}
	panic("model: waiter not queued")
}

// best is the model's choice at level: the oldest waiter of the flow
// holding the fewest permits per weight, ties to the least recent turn.
func (m *model) best(level int) *mWaiter {
	var best *mWaiter
	seen := map[string]bool{}
	for _, w := range m.waiters { // arrival order: the first of each flow is its head
		if w.level != level || seen[w.key] {
			continue
		}
		seen[w.key] = true
		if best == nil {
			best = w
			continue
		}
		if c := m.share(w.key, best.key); c < 0 || c == 0 && m.turn[w.key] < m.turn[best.key] {
			best = w
		}
	}
	return best
}

// share compares a's and b's permits held per weight.
func (m *model) share(a, b string) int {
	x, y := int64(m.held[a])*m.weight[b], int64(m.held[b])*m.weight[a]
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func (m *model) queuedAt(key string, level int) int {
	n := 0
	for _, w := range m.waiters {
		if w.key == key && w.level == level {
			n++
		}
	}
	return n
}

// TestTableMatchesModel checks the table against the model under random
// pushes, grants, releases and removals: the waiter granted is the model's
// (fewest permits held per weight, ties to the longest wait), which is the
// head of its flow (FIFO within a flow); the flow shed from uses the most
// (waiters and permits) per weight; a permit is held until released, never twice; and
// a flow stays in the table exactly while it waits or holds a permit.
func TestTableMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var tab Table[int]
		levels := []*Level[int]{tab.NewLevel(), tab.NewLevel()}
		m := &model{weight: map[string]int64{}, held: map[string]int{}, turn: map[string]uint64{}}
		var permits []*Flow[int] // one entry per permit held
		var permitKeys []string
		keys := []string{"a", "b", "c", "d", "e"}
		id := 0

		rt.Repeat(map[string]func(*rapid.T){
			"push": func(rt *rapid.T) {
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				lv := rapid.IntRange(0, len(levels)-1).Draw(rt, "level")
				weight := rapid.IntRange(-1, 4).Draw(rt, "weight")
				m.touch(key, weight)
				m.seq++
				id++
				w := &mWaiter{id: id, key: key, level: lv, node: &Node[int]{Value: id}}
				m.waiters = append(m.waiters, w)
				levels[lv].Push(w.node, key, weight)
			},
			"hold": func(rt *rapid.T) {
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				weight := rapid.IntRange(1, 4).Draw(rt, "weight")
				m.touch(key, weight)
				m.held[key]++
				m.seq++
				m.turn[key] = m.seq
				permits = append(permits, tab.Hold(key, weight))
				permitKeys = append(permitKeys, key)
			},
			"grant": func(rt *rapid.T) {
				lv := rapid.IntRange(0, len(levels)-1).Draw(rt, "level")
				want := m.best(lv)
				got := levels[lv].Best()
				if want == nil {
					if got != nil {
						rt.Fatalf("level %d: Best = %d, want none", lv, got.Value)
					}
					return
				}
				if got == nil || got.Value != want.id {
					rt.Fatalf("level %d: Best = %v, want %d (flow %s)", lv, got, want.id, want.key)
				}
				if newest := levels[lv].BestNewest(); newest.Flow() != got.Flow() {
					rt.Fatalf("BestNewest is of flow %s, Best of %s", newest.Flow().Key(), got.Flow().Key())
				}
				f := Grant(got)
				if f.Key() != want.key || got.Queued() {
					rt.Fatalf("Grant returned flow %s (queued %v), want %s", f.Key(), got.Queued(), want.key)
				}
				m.removeWaiter(want)
				m.held[want.key]++
				m.seq++
				m.turn[want.key] = m.seq
				permits = append(permits, f)
				permitKeys = append(permitKeys, want.key)
			},
			"release": func(rt *rapid.T) {
				if len(permits) == 0 {
					rt.Skip("no permit held")
				}
				i := rapid.IntRange(0, len(permits)-1).Draw(rt, "permit")
				f, key := permits[i], permitKeys[i]
				if f.Key() != key || f.Held() != m.held[key] {
					rt.Fatalf("permit of %s: flow %s holds %d, model %d", key, f.Key(), f.Held(), m.held[key])
				}
				tab.Release(f)
				m.held[key]--
				permits = append(permits[:i], permits[i+1:]...)
				permitKeys = append(permitKeys[:i], permitKeys[i+1:]...)
			},
			"remove": func(rt *rapid.T) {
				if len(m.waiters) == 0 {
					rt.Skip("nobody queued")
				}
				w := m.waiters[rapid.IntRange(0, len(m.waiters)-1).Draw(rt, "waiter")]
				Remove(w.node)
				m.removeWaiter(w)
			},
			"largest": func(rt *rapid.T) {
				lv := rapid.IntRange(0, len(levels)-1).Draw(rt, "level")
				f, n, oldest, newest := levels[lv].Largest()
				if f == nil {
					if levels[lv].Len() != 0 {
						rt.Fatalf("Largest is nil with %d queued", levels[lv].Len())
					}
					return
				}
				use := func(k string) int { return m.queuedAt(k, lv) + m.held[k] }
				if n != use(f.Key()) || n != levels[lv].Use(f.Key())-1 {
					rt.Fatalf("Largest %s: use %d, model %d", f.Key(), n, use(f.Key()))
				}
				if oldest.Flow() != f || newest.Flow() != f {
					rt.Fatal("Largest's oldest and newest are not of its flow")
				}
				for _, k := range keys {
					if m.queuedAt(k, lv) > 0 && int64(use(k))*f.Weight() > int64(n)*m.weight[k] {
						rt.Fatalf("Largest %s uses %d/%d per weight, but %s uses %d/%d", f.Key(), n, f.Weight(), k, use(k), m.weight[k])
					}
				}
			},
			"": func(rt *rapid.T) {
				active, held := 0, 0
				for _, k := range keys {
					f := tab.Lookup(k)
					if m.active(k) != (f != nil) {
						rt.Fatalf("flow %s: in table %v, active in model %v", k, f != nil, m.active(k))
					}
					if f != nil {
						active++
						if f.Held() != m.held[k] || f.Weight() != m.weight[k] {
							rt.Fatalf("flow %s: held %d weight %d, model %d %d", k, f.Held(), f.Weight(), m.held[k], m.weight[k])
						}
					}
					held += m.held[k]
				}
				if tab.Active() != active || tab.Held() != held {
					rt.Fatalf("Active %d Held %d, model %d %d", tab.Active(), tab.Held(), active, held)
				}
				for lv, l := range levels {
					n := 0
					for _, w := range m.waiters {
						if w.level == lv {
							n++
						}
					}
					if l.Len() != n {
						rt.Fatalf("level %d: Len %d, model %d", lv, l.Len(), n)
					}
				}
			},
		})
	})
}

// TestQuietFlowNotStarved: a quiet flow's waiter, queued behind noisy
// flows that keep a backlog, is granted within L+F grants when permits
// finish in the order they were granted (L permits, F flows waiting):
// once the permits it held have finished it holds fewer than any flow
// that was granted meanwhile.
func TestQuietFlowNotStarved(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var tab Table[int]
		lv := tab.NewLevel()
		limit := rapid.IntRange(1, 20).Draw(rt, "limit")
		noisy := rapid.IntRange(1, 5).Draw(rt, "noisy")
		quietWeight := rapid.IntRange(1, 3).Draw(rt, "quietWeight")
		// The permits in flight, oldest first, to any mix of flows.
		var inFlight []*Flow[int]
		for range limit {
			k := rapid.IntRange(0, noisy).Draw(rt, "holder") // noisy: 0 is the quiet flow
			inFlight = append(inFlight, tab.Hold(fmt.Sprint(k), 1))
		}
		backlog := func() {
			for k := 1; k <= noisy; k++ {
				for lv.Queued(fmt.Sprint(k)) < 3 {
					lv.Push(&Node[int]{Value: k}, fmt.Sprint(k), rapid.IntRange(1, 3).Draw(rt, "w"))
				}
			}
		}
		backlog()
		quiet := &Node[int]{Value: 0}
		lv.Push(quiet, "0", quietWeight)
		bound := limit + noisy + 1
		for g := 1; ; g++ {
			tab.Release(inFlight[0])
			inFlight = inFlight[1:]
			n := lv.Best()
			f := Grant(n)
			inFlight = append(inFlight, f)
			if n == quiet {
				if g > bound {
					rt.Fatalf("quiet flow granted after %d grants, bound %d", g, bound)
				}
				return
			}
			if g > bound {
				rt.Fatalf("quiet flow still waiting after %d grants", g)
			}
			backlog()
		}
	})
}

func TestWeightClamp(t *testing.T) {
	for _, c := range []struct{ in, want int }{{-5, 1}, {0, 1}, {1, 1}, {7, 7}, {MaxWeight + 1, MaxWeight}} {
		if got := clampWeight(c.in); got != int64(c.want) {
			t.Errorf("clampWeight(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestReleaseWithoutPermitPanics(t *testing.T) {
	var tab Table[int]
	f := tab.Hold("a", 1)
	tab.Release(f)
	defer func() {
		if recover() == nil {
			t.Fatal("a second Release did not panic")
		}
	}()
	g := tab.Hold("b", 1)
	tab.Release(g)
	tab.Release(g)
}
