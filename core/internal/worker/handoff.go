package worker

import (
	"context"
	"sync"
	"sync/atomic"
)

// Handoff runs a timed request's work on a goroutine of Go's while the
// request's own goroutine waits, and wakes that goroutine at the first of
// the work's return and the deadline's answer: the one way this package
// and its adapters (fiber's OnTimeHandler, the gRPC adapter's timed calls)
// answer a deadline while a handler runs on.
//
// Embed it in the request's state; the zero value is ready. The request's
// goroutine calls Start, then Wait; the deadline's callback calls Claim,
// writes what the waiter reads after an answer, then Wake (Answer, when
// there is nothing to write). Which of the work's return and Claim comes
// first decides, once:
//
//	         Run returns (a panic is kept for Wait)
//	running ─────────────────────────────────────▶ returned
//	   │
//	   └──Claim──▶ answered  (the work runs on; Wait returns at Wake)
//
// A panic of the work after an answer has nobody left to go to: the work
// may implement LatePanic to report it (the net/http middleware logs it as
// net/http logs a handler's panic); otherwise it is raised again on the
// worker, as a go statement would, which ends the program.
//
// A Handoff may be started again once Wait has returned false.
type Handoff struct {
	state atomic.Uint32
	// wake is held from Start until the work returns or Wake, and Wait
	// waits by locking it: a Mutex may be unlocked by another goroutine,
	// and unlike a channel it needs no allocation.
	wake     sync.Mutex
	work     Task
	panicked bool // set before wake is unlocked, read by Wait
	panicVal any
}

const (
	handoffRunning uint32 = iota
	handoffReturned
	handoffAnswered
)

// LatePanic is implemented by work that reports its own panic after its
// request was answered (see Handoff).
type LatePanic interface{ LatePanic(v any) }

// Start runs work.Run on a goroutine of Go's, with ctx's profiler labels.
func (h *Handoff) Start(ctx context.Context, work Task) {
	h.state.Store(handoffRunning)
	h.panicked, h.panicVal = false, nil
	h.work = work
	h.wake.Lock()
	Go(ctx, h)
}

// Run is the worker's side; it is Go's Task, not for callers.
func (h *Handoff) Run() {
	work := h.work
	completed := false
	defer func() {
		if completed {
			if h.state.CompareAndSwap(handoffRunning, handoffReturned) {
				h.wake.Unlock()
			}
			return
		}
		v := recover()
		if h.state.CompareAndSwap(handoffRunning, handoffReturned) {
			h.panicked, h.panicVal = true, v
			h.wake.Unlock()
			return
		}
		if l, ok := work.(LatePanic); ok {
			l.LatePanic(v) // here, on the panicking stack
			return
		}
		panic(v)
	}()
	work.Run()
	completed = true
}

// Claim moves a running handoff to answered and reports whether it did:
// false if the work returned first, or another answer claimed it. Its
// caller writes what the waiter reads, then calls Wake.
func (h *Handoff) Claim() bool {
	return h.state.CompareAndSwap(handoffRunning, handoffAnswered)
}

// Wake lets Wait return after a successful Claim.
func (h *Handoff) Wake() { h.wake.Unlock() }

// Answer is Claim then Wake, for an answer the waiter needs nothing of.
func (h *Handoff) Answer() bool {
	if !h.Claim() {
		return false
	}
	h.Wake()
	return true
}

// Answered reports whether the request was answered before its work
// returned: what a late handler's guards read.
func (h *Handoff) Answered() bool { return h.state.Load() == handoffAnswered }

// Wait returns once the work returned, false, or its answer was claimed
// and woken, true. A panic of the work that returned first is raised here,
// on the waiting goroutine, as without the handoff.
func (h *Handoff) Wait() (answered bool) {
	h.wake.Lock()
	//lint:ignore SA2001 locking is the wait (see wake); unlocked again so h can be started anew
	h.wake.Unlock()
	if h.state.Load() == handoffAnswered {
		return true
	}
	if h.panicked {
		v := h.panicVal
		h.panicked, h.panicVal = false, nil
		panic(v)
	}
	return false
}
