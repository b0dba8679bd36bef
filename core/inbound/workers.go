package inbound

import (
	"context"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/ylcnfrht/resilience/core/internal/deadline"
)

// Task is work for Go: its Run is called once, on a goroutine of its own.
type Task interface{ Run() }

// Go runs t.Run on a goroutine of its own, as a go statement would, for an
// adapter that runs a handler apart from the server's goroutine so that a
// deadline can be answered while the handler runs on (fiber's
// OnTimeHandler, the gRPC adapter). Every detached request of this package
// runs through it too.
//
// Unlike a go statement it reuses goroutines that finished a task: a
// handler's call chain is deep, and a fresh goroutine's stack grows to it
// by copying itself several times, which costs more than the handler's own
// work in a small call. A goroutine left without a task for 50 ms exits,
// so a test that checks for leaked goroutines (goleak) finds none soon
// after its last request. Inside a testing/synctest bubble Go starts a
// fresh goroutine every time: a reused one would belong to the wrong
// clock.
//
// The goroutine carries ctx's profiler labels (runtime/pprof.Do), not
// those of Go's caller. A panic in t.Run that t does not recover ends the
// program, as in a go statement.
func Go(ctx context.Context, t Task) {
	if deadline.FakeClock(time.Now()) {
		go t.Run()
		return
	}
	workers.mu.Lock()
	if n := len(workers.idle); n > 0 {
		w := workers.idle[n-1]
		workers.idle[n-1] = nil
		workers.idle = workers.idle[:n-1]
		workers.mu.Unlock()
		w.next <- job{ctx, t} // buffered, and w waits for it: never blocks
		return
	}
	workers.mu.Unlock()
	go work(job{ctx, t})
}

// idleExit is how long a goroutine of Go's waits for its next task.
const idleExit = 50 * time.Millisecond

// workers are Go's goroutines waiting for a task, the most recently busy
// last: it is given the next task, so under steady traffic the same few
// stay busy and the others reach idleExit and leave.
var workers struct {
	mu   sync.Mutex
	idle []*worker
}

type job struct {
	ctx context.Context
	t   Task
}

type worker struct{ next chan job }

// work runs j and every task it is given after, until it waits idleExit
// for one.
func work(j job) {
	var w *worker
	var idle *time.Timer
	for {
		pprof.SetGoroutineLabels(j.ctx)
		j.t.Run()
		j = job{}
		if w == nil {
			w = &worker{next: make(chan job, 1)}
			idle = time.NewTimer(idleExit)
		} else {
			idle.Reset(idleExit)
		}
		workers.mu.Lock()
		workers.idle = append(workers.idle, w)
		workers.mu.Unlock()
		select {
		case j = <-w.next:
			continue
		case <-idle.C:
		}
		workers.mu.Lock()
		if i := slices.Index(workers.idle, w); i >= 0 {
			workers.idle = slices.Delete(workers.idle, i, i+1)
			workers.mu.Unlock()
			return
		}
		workers.mu.Unlock()
		j = <-w.next // taken off the list as the timer fired: its task is on the way
	}
}
