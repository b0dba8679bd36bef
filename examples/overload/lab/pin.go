package lab

import (
	"fmt"
	"runtime"
	"strings"
)

// cpuSplit is how a pinned run shares the CPUs: the load generator (this
// process) runs on gen, the service process on service.
type cpuSplit struct{ gen, service []int }

// splitCPUs gives the generator the first of cpus and the service the
// rest; it needs two at least.
func splitCPUs(cpus []int) (cpuSplit, error) {
	if len(cpus) < 2 {
		return cpuSplit{}, fmt.Errorf("%d CPU available, pinning needs 2", len(cpus))
	}
	return cpuSplit{gen: cpus[:1:1], service: cpus[1:]}, nil
}

func (s cpuSplit) String() string {
	return fmt.Sprintf("generator on CPU %s, service on CPU %s", cpuList(s.gen), cpuList(s.service))
}

func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = fmt.Sprint(c)
	}
	return strings.Join(s, ",")
}

// pinGenerator moves this process onto the generator's share of the CPUs
// it may use, with GOMAXPROCS to match, and returns the split and how to
// undo it.
func pinGenerator() (cpuSplit, func(), error) {
	cpus, err := allowedCPUs()
	if err != nil {
		return cpuSplit{}, nil, err
	}
	s, err := splitCPUs(cpus)
	if err != nil {
		return cpuSplit{}, nil, err
	}
	unpin, err := pinProcess(s.gen)
	if err != nil {
		return cpuSplit{}, nil, err
	}
	prev := runtime.GOMAXPROCS(len(s.gen))
	return s, func() {
		runtime.GOMAXPROCS(prev)
		unpin()
	}, nil
}
