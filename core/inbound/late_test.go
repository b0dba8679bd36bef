package inbound

import "testing"

// TestCountLate: a handler an adapter counts late shows in Late until its
// return is reported, once however often it is reported, and LateTotal
// keeps it.
func TestCountLate(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := m.CountLate(), m.CountLate()
	if s := m.Stats(); s.Late != 2 || s.LateTotal != 2 {
		t.Fatalf("two late handlers: %+v, want Late 2, LateTotal 2", s)
	}
	a()
	a()
	if s := m.Stats(); s.Late != 1 || s.LateTotal != 2 {
		t.Fatalf("one returned (reported twice): %+v, want Late 1, LateTotal 2", s)
	}
	b()
	if s := m.Stats(); s.Late != 0 || s.LateTotal != 2 {
		t.Fatalf("both returned: %+v, want Late 0, LateTotal 2", s)
	}
}
