package worker

import (
	"context"
	"runtime"
	"testing"

	"pgregory.net/rapid"
)

// handoffWork is work for a Handoff: it waits for gate, then returns or
// panics, and records a late panic.
type handoffWork struct {
	gate     chan struct{}
	panicVal any
	spins    int
	late     chan any
	returned chan struct{}
}

func (w *handoffWork) Run() {
	if w.returned != nil {
		defer close(w.returned)
	}
	if w.gate != nil {
		<-w.gate
	}
	for range w.spins {
		runtime.Gosched()
	}
	if w.panicVal != nil {
		panic(w.panicVal)
	}
}

func (w *handoffWork) LatePanic(v any) { w.late <- v }

// Whichever of the work's return and an answer's Claim comes first owns
// the handoff, once: exactly one of them wins, Wait reports the winner,
// and a second Claim always fails. Drawn schedules race the two.
func TestHandoffOneOwnerOfTheEnd(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var h Handoff
		w := &handoffWork{spins: rapid.IntRange(0, 20).Draw(t, "work spins"), returned: make(chan struct{})}
		claimSpins := rapid.IntRange(0, 20).Draw(t, "claim spins")
		h.Start(context.Background(), w)
		claimed := make(chan bool, 1)
		go func() {
			for range claimSpins {
				runtime.Gosched()
			}
			ok := h.Claim()
			if ok {
				h.Wake()
			}
			claimed <- ok
		}()
		answered := h.Wait()
		won := <-claimed
		<-w.returned
		if answered != won {
			t.Fatalf("Wait answered %v, Claim won %v: one owner must decide both", answered, won)
		}
		if h.Claim() {
			t.Fatal("a second Claim won")
		}
		if answered != h.Answered() {
			t.Fatalf("Answered %v after Wait %v", h.Answered(), answered)
		}
	})
}

// A panic of work that returned first is raised by Wait, on the waiting
// goroutine, and the handoff can start again afterwards.
func TestHandoffPanicBeforeAnswerRaisedByWait(t *testing.T) {
	var h Handoff
	h.Start(context.Background(), &handoffWork{panicVal: "boom"})
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Fatalf("Wait raised %v, want the work's panic", v)
			}
		}()
		h.Wait()
		t.Fatal("Wait returned without the work's panic")
	}()
	h.Start(context.Background(), &handoffWork{})
	if h.Wait() {
		t.Fatal("a restarted handoff reports an answer nobody gave")
	}
}

// A panic after the answer goes to the work's LatePanic, on its worker;
// Wait has returned true already and raises nothing.
func TestHandoffPanicAfterAnswerGoesToLatePanic(t *testing.T) {
	var h Handoff
	w := &handoffWork{gate: make(chan struct{}), panicVal: "late", late: make(chan any, 1)}
	h.Start(context.Background(), w)
	if !h.Answer() {
		t.Fatal("Answer lost to work that had not returned")
	}
	if !h.Wait() {
		t.Fatal("Wait did not report the answer")
	}
	close(w.gate)
	if v := <-w.late; v != "late" {
		t.Fatalf("LatePanic got %v, want the late panic", v)
	}
}
