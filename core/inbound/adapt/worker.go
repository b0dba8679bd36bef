package adapt

import (
	"context"
	"net/http"

	"github.com/ylcnfrht/resilience/core/internal/worker"
)

// Task is work for Go: its Run is called once, on a goroutine of its own.
type Task interface{ Run() }

// Go runs t.Run on a goroutine of its own, as a go statement would, for an
// adapter that runs a handler apart from the server's goroutine so that a
// deadline can be answered while the handler runs on (fiber's
// OnTimeHandler, the gRPC adapter). Every detached request of the inbound
// middleware runs through it too.
//
// Unlike a go statement it reuses goroutines that finished a task: a
// handler's call chain is deep, and a fresh goroutine's stack grows to it
// by copying itself several times, which costs more than the handler's own
// work in a small call. A goroutine left without a task for 50 ms exits,
// so a test that checks for leaked goroutines (goleak) finds none soon
// after its last request. Inside a testing/synctest bubble Go starts a
// fresh goroutine every time. The goroutine carries ctx's profiler labels
// (runtime/pprof.Do). A panic in t.Run that t does not recover ends the
// program, as in a go statement.
func Go(ctx context.Context, t Task) { worker.Go(ctx, t) }

// Handoff runs a timed request's work on a goroutine of Go's while the
// request's own goroutine waits, and wakes that goroutine at the first of
// the work's return and the deadline's answer: the one way the inbound
// middleware and its adapters (fiber's OnTimeHandler, the gRPC adapter's
// timed calls) answer a deadline while a handler runs on.
//
// Embed it in the request's state; the zero value is ready. The request's
// goroutine calls Start, then Wait; the deadline's callback calls Claim,
// writes what the waiter reads after an answer, then Wake (Answer, when
// there is nothing to write). Which of the work's return and Claim comes
// first decides, once:
//
//	         the work returns (a panic is kept for Wait)
//	running ─────────────────────────────────────────▶ returned
//	   │
//	   └──Claim──▶ answered  (the work runs on; Wait returns at Wake)
//
// A panic of the work after an answer has nobody left to go to: the work
// may implement LatePanic to report it; otherwise it is raised again on
// the worker, as a go statement would, which ends the program. A Handoff
// may be started again once Wait has returned false.
type Handoff struct{ h worker.Handoff }

// LatePanic is implemented by work that reports its own panic after its
// request was answered (see Handoff).
type LatePanic interface{ LatePanic(v any) }

// Start runs work.Run on a goroutine of Go's, with ctx's profiler labels.
func (h *Handoff) Start(ctx context.Context, work Task) { h.h.Start(ctx, work) }

// Claim moves a running handoff to answered and reports whether it did:
// false if the work returned first, or another answer claimed it. Its
// caller writes what the waiter reads, then calls Wake.
func (h *Handoff) Claim() bool { return h.h.Claim() }

// Wake lets Wait return after a successful Claim.
func (h *Handoff) Wake() { h.h.Wake() }

// Answer is Claim then Wake, for an answer the waiter needs nothing of.
func (h *Handoff) Answer() bool { return h.h.Answer() }

// Answered reports whether the request was answered before its work
// returned: what a late handler's guards read.
func (h *Handoff) Answered() bool { return h.h.Answered() }

// Wait returns once the work returned, false, or its answer was claimed
// and woken, true. A panic of the work that returned first is raised here,
// on the waiting goroutine, as without the handoff.
func (h *Handoff) Wait() (answered bool) { return h.h.Wait() }

// LogPanic logs to the ErrorLog of the server serving r (the log
// package's default logger without one), as net/http logs a handler's
// panic: for a panic after the deadline was answered, which no one is left
// to re-raise it to.
func LogPanic(r *http.Request, format string, args ...any) { worker.LogPanic(r, format, args...) }
