//go:build linux

package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// cpusOf parses the Cpus_allowed_list line of a /proc status file
// ("0-2,5").
func cpusOf(t *testing.T, status string) []int {
	t.Helper()
	for _, l := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || k != "Cpus_allowed_list" {
			continue
		}
		var cpus []int
		for _, r := range strings.Split(strings.TrimSpace(v), ",") {
			lo, hi, isRange := strings.Cut(r, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if isRange {
				b, _ = strconv.Atoi(hi)
			}
			for c := a; c <= b; c++ {
				cpus = append(cpus, c)
			}
		}
		return cpus
	}
	t.Fatalf("no Cpus_allowed_list in %q", status)
	return nil
}

// threadCPUs returns the CPUs of every thread of this process.
func threadCPUs(t *testing.T) [][]int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue // the thread ended
		}
		out = append(out, cpusOf(t, string(b)))
	}
	return out
}

// Pinning moves every thread of this process to the generator's CPU and
// undoing it puts them all back; a service started on its CPUs runs there
// from its first instruction.
func TestPinGeneratorAndStartServiceOnTheOthers(t *testing.T) {
	all, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 2 {
		t.Skipf("%d CPU available", len(all))
	}
	split, unpin, err := pinGenerator()
	if err != nil {
		t.Fatal(err)
	}
	pinned := threadCPUs(t)
	cmd := exec.Command("cat", "/proc/self/status")
	var out strings.Builder
	cmd.Stdout = &out
	startErr := startOn(cmd, split.service)
	if startErr == nil {
		startErr = cmd.Wait()
	}
	unpin()
	for i, c := range pinned {
		if !slices.Equal(c, split.gen) {
			t.Errorf("thread %d of %d on CPUs %v while pinned, want %v", i, len(pinned), c, split.gen)
		}
	}
	if startErr != nil {
		t.Fatal(startErr)
	}
	if got := cpusOf(t, out.String()); !slices.Equal(got, split.service) {
		t.Errorf("service process on CPUs %v, want %v", got, split.service)
	}
	for i, c := range threadCPUs(t) {
		if !slices.Equal(c, all) {
			t.Errorf("thread %d on CPUs %v after unpinning, want %v", i, c, all)
		}
	}
}
