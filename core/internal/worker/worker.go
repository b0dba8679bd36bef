package worker

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

// idleExit is about how long a goroutine of Go's waits for its next task
// before it exits: between idleExit and 1.5×idleExit.
const idleExit = 50 * time.Millisecond

// workers are Go's goroutines waiting for a task, the most recently busy
// last: it is given the next task, so under steady traffic the same few
// stay busy and the others age at the front of the list until a sweep
// tells them to exit.
//
// A sweep runs every idleExit/2 while a goroutine waits, rather than each
// goroutine waiting on a timer of its own: arming a timer and waiting on
// two channels cost more, per task, than the rest of the handoff.
var workers struct {
	mu    sync.Mutex
	idle  []*worker   // oldest first
	ticks uint64      // sweeps so far
	sweep *time.Timer // armed while idle is not empty
	armed bool
}

type job struct {
	ctx context.Context
	t   Task // nil: exit
}

type worker struct {
	next  chan job
	since uint64 // workers.ticks when it began to wait
}

// work runs j and every task it is given after, until a sweep finds it
// waited idleExit.
func work(j job) {
	w := &worker{next: make(chan job, 1)}
	for {
		pprof.SetGoroutineLabels(j.ctx)
		j.t.Run()
		j = job{} // the task's memory is not kept while waiting
		workers.mu.Lock()
		w.since = workers.ticks
		workers.idle = append(workers.idle, w)
		if !workers.armed {
			workers.armed = true
			if workers.sweep == nil {
				workers.sweep = time.AfterFunc(idleExit/2, sweep)
			} else {
				workers.sweep.Reset(idleExit / 2)
			}
		}
		workers.mu.Unlock()
		if j = <-w.next; j.t == nil {
			return
		}
	}
}

// sweep tells the goroutines that have waited through two whole sweep
// intervals (idleExit or more) to exit, and comes back while any wait.
func sweep() {
	workers.mu.Lock()
	defer workers.mu.Unlock()
	workers.ticks++
	n := 0
	for _, w := range workers.idle {
		if workers.ticks-w.since < 3 {
			break // the rest began to wait later
		}
		w.next <- job{} // buffered, and w waits for it: never blocks
		n++
	}
	workers.idle = slices.Delete(workers.idle, 0, n)
	if workers.armed = len(workers.idle) > 0; workers.armed {
		workers.sweep.Reset(idleExit / 2)
	}
}
