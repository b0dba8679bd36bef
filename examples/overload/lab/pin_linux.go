//go:build linux

package lab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"
)

// cpuMask is a Linux CPU affinity mask (CPUs 0 to 1023).
type cpuMask [16]uint64

func (m *cpuMask) set(cpu int)      { m[cpu/64] |= 1 << (cpu % 64) }
func (m *cpuMask) has(cpu int) bool { return m[cpu/64]&(1<<(cpu%64)) != 0 }

func maskOf(cpus []int) cpuMask {
	var m cpuMask
	for _, c := range cpus {
		m.set(c)
	}
	return m
}

// getAffinity returns the CPUs thread tid (0: the calling thread) may run
// on.
func getAffinity(tid int) (cpuMask, error) {
	var m cpuMask
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, uintptr(tid), unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m)))
	if e != 0 {
		return m, e
	}
	return m, nil
}

func setAffinity(tid int, m *cpuMask) error {
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(*m), uintptr(unsafe.Pointer(m)))
	if e != 0 {
		return e
	}
	return nil
}

// allowedCPUs lists the CPUs this process may run on, in increasing order.
func allowedCPUs() ([]int, error) {
	m, err := getAffinity(0)
	if err != nil {
		return nil, err
	}
	var cpus []int
	for c := range len(m) * 64 {
		if m.has(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// pinProcess moves every thread of this process onto cpus (threads started
// later inherit it from the thread that starts them) and returns how to
// put every thread back on the CPUs the process had.
func pinProcess(cpus []int) (restore func(), err error) {
	orig, err := getAffinity(0)
	if err != nil {
		return nil, err
	}
	m := maskOf(cpus)
	if err := eachThread(func(tid int) error { return setAffinity(tid, &m) }); err != nil {
		eachThread(func(tid int) error { return setAffinity(tid, &orig) }) //nolint:errcheck // best effort
		return nil, err
	}
	return func() {
		eachThread(func(tid int) error { return setAffinity(tid, &orig) }) //nolint:errcheck // best effort
	}, nil
}

// eachThread calls f for every thread of this process; a thread that ended
// meanwhile is skipped.
func eachThread(f func(tid int) error) error {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := f(tid); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	return nil
}

// startOn starts cmd with its affinity set to cpus from the start, so that
// its runtime sizes GOMAXPROCS from them: the fork happens on a thread of
// its own pinned to cpus, a thread that ends with it.
func startOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the runtime ends this thread, and its affinity
		// with it, when the goroutine returns.
		runtime.LockOSThread()
		m := maskOf(cpus)
		if err := setAffinity(0, &m); err != nil {
			errc <- fmt.Errorf("pin the service process: %w", err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}
