package lab

import (
	"slices"
	"testing"
)

// The generator takes the first CPU and the service the rest; fewer than
// two CPUs cannot be split.
func TestSplitCPUs(t *testing.T) {
	s, err := splitCPUs([]int{2, 3, 5})
	if err != nil || !slices.Equal(s.gen, []int{2}) || !slices.Equal(s.service, []int{3, 5}) {
		t.Fatalf("split of 2,3,5 = %+v, %v; want generator 2, service 3,5", s, err)
	}
	if got, want := s.String(), "generator on CPU 2, service on CPU 3,5"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if _, err := splitCPUs([]int{0}); err == nil {
		t.Error("one CPU split without an error")
	}
}
