package conformance

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// The suite's handlers are ordinary net/http handlers. Each request names
// itself with the "id" query parameter so that a case can tell requests
// apart, hold them and release them one by one.

// holder announces each request on entered and holds it until its gate
// opens (release) or, when watch is set, until its context ends; then it
// reports how it ended on exited and writes "done <id>". It never sleeps.
type holder struct {
	e       *env
	watch   bool
	entered chan string
	exited  chan exit

	mu    sync.Mutex
	gates map[string]*gate
}

// exit is how a held handler ended: its context's error and cause at the
// moment it stopped waiting (nil when released by its gate first).
type exit struct {
	id    string
	err   error
	cause error
}

// chanBuf is larger than the number of requests any gated case makes, so
// handlers never block announcing themselves.
const chanBuf = 1024

func (e *env) holder(watch bool) *holder {
	return &holder{e: e, watch: watch, entered: make(chan string, chanBuf),
		exited: make(chan exit, chanBuf), gates: make(map[string]*gate)}
}

func (h *holder) gateFor(id string) *gate {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.gates[id]
	if !ok {
		g = h.e.gate()
		h.gates[id] = g
	}
	return g
}

func (h *holder) release(id string) { h.gateFor(id).open() }

func (h *holder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	g := h.gateFor(id)
	h.entered <- id
	ctx := r.Context()
	var x exit
	if h.watch {
		select {
		case <-g.ch:
		case <-ctx.Done():
			x = exit{err: ctx.Err(), cause: context.Cause(ctx)}
		}
	} else {
		<-g.ch
	}
	x.id = id
	h.exited <- x
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "done "+id)
}

// waitEntered waits for the request id to enter the handler. It fails at
// once if the request was answered without entering it.
func (h *holder) waitEntered(id string) {
	h.e.t.Helper()
	deadline := time.After(waitDeadline)
	tick := time.NewTicker(pollTick)
	defer tick.Stop()
	for {
		select {
		case got := <-h.entered:
			if got != id {
				h.e.t.Fatalf("request %q entered the handler, want %q", got, id)
			}
			return
		case <-tick.C:
			if !h.e.allAnswered(id) {
				continue
			}
			select { // it entered, then was answered
			case got := <-h.entered:
				if got != id {
					h.e.t.Fatalf("request %q entered the handler, want %q", got, id)
				}
				return
			default:
			}
			h.e.t.Fatalf("request %s was answered without entering the handler", id)
		case <-h.e.t.Decided().Done():
			h.e.t.stopWaiting("request " + id + " entering the handler")
		case <-deadline:
			h.e.t.Fatalf("request %s entering the handler: nothing after %v", id, waitDeadline)
		}
	}
}

// notEntered asserts that no request entered the handler since the last
// one received, without waiting.
func (h *holder) notEntered(why string) {
	h.e.t.Helper()
	select {
	case id := <-h.entered:
		h.e.t.Errorf("request %q entered the handler; %s", id, why)
	default:
	}
}

func (h *holder) waitExited(id string) exit {
	h.e.t.Helper()
	x := receive(h.e.t, "request "+id+" leaving the handler", h.exited)
	if x.id != id {
		h.e.t.Fatalf("request %q left the handler, want %q", x.id, id)
	}
	return x
}

// okHandler answers 200 "ok" at once.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "ok")
})
