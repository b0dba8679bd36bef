package inbound

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// writerState is where a timed response stands. Transitions happen under
// timeoutWriter.mu:
//
//	open ──handler writes/flushes──▶ committed ──deadline──▶ aborted
//	  │                                  │
//	  ├──deadline──▶ timedOut            └──Hijack──▶ hijacked
//	  └──Hijack──▶ hijacked
//
// and every state ends in done when ServeHTTP returns, after which the
// underlying writer is never touched again.
type writerState uint8

const (
	// stateOpen: nothing sent; the handler's header fields are still its
	// own map, so a 504 can replace the response entirely.
	stateOpen writerState = iota
	// stateCommitted: the handler started its response on the wire
	// (WriteHeader, Write or Flush passed through).
	stateCommitted
	// stateTimedOut: the 504 was sent at the deadline; the handler's
	// writes are discarded.
	stateTimedOut
	// stateAborted: the deadline passed after the handler committed; no
	// further byte is sent and the connection is dropped when the handler
	// returns.
	stateAborted
	// stateHijacked: the handler owns the connection; no longer timed.
	stateHijacked
	// stateDone: ServeHTTP has returned (or is returning).
	stateDone
)

// timeoutWriter is the http.ResponseWriter a timed handler gets. It
// decides, under one mutex, whether the response is the handler's or the
// middleware's 504, so that exactly one of them reaches the client and a
// late handler's writes are dropped without a data race on the underlying
// writer.
//
// The handler's header map is private until the handler commits: the 504,
// written from the timer's goroutine, must neither carry the handler's
// fields nor touch a map the handler may be writing to. Body writes pass
// through as they come (no buffering, no copy); the mutex is held only for
// the state change, not during the write, so a handler blocked writing to
// a slow client does not delay the deadline, which then releases it by
// setting the write deadline.
type timeoutWriter struct {
	w     http.ResponseWriter
	owner *timedRequest

	// Touched only by the handler's goroutine.
	h          http.Header // the handler's fields until commit; nil until asked for
	hcommitted bool        // the handler committed (mirrors state for the handler)

	mu         sync.Mutex
	state      writerState
	late       bool     // counted in Middleware.late
	status     int16    // the handler's status once committed (200 if implicit); fits the padding
	informKeys []string // fields copied to w for 1xx responses, removed by the 504
}

// Header returns the handler's header map: private until the response is
// committed, the underlying one after (so trailers set late still work).
func (tw *timeoutWriter) Header() http.Header {
	if tw.hcommitted {
		return tw.w.Header()
	}
	if tw.h == nil {
		tw.h = make(http.Header)
	}
	return tw.h
}

// copyHeaderLocked moves the handler's fields to the underlying map.
func (tw *timeoutWriter) copyHeaderLocked() {
	if len(tw.h) == 0 {
		return
	}
	dst := tw.w.Header()
	for k, v := range tw.h {
		dst[k] = v
	}
}

// commitLocked makes the handler's response the response.
func (tw *timeoutWriter) commitLocked() {
	tw.copyHeaderLocked()
	tw.state = stateCommitted
	tw.hcommitted = true
	if tw.status == 0 {
		tw.status = http.StatusOK // Write or Flush without WriteHeader
	}
}

// WriteHeader sends the status (and the handler's fields) unless the
// deadline has passed. 1xx informational responses are sent without
// committing, as net/http does.
func (tw *timeoutWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http does
	}
	tw.mu.Lock()
	defer tw.mu.Unlock()
	switch tw.state {
	case stateOpen:
		if code < 200 && code != http.StatusSwitchingProtocols {
			tw.copyHeaderLocked()
			for k := range tw.h {
				tw.informKeys = append(tw.informKeys, k)
			}
			tw.w.WriteHeader(code)
			return
		}
		tw.status = int16(code) // WriteHeader checked 100..999
		tw.commitLocked()
		tw.w.WriteHeader(code)
	case stateCommitted:
		tw.w.WriteHeader(code) // superfluous: net/http logs it
	}
}

// errAfterState is what a write returns once the handler no longer owns
// the response.
func errAfterState(s writerState) error {
	if s == stateHijacked {
		return http.ErrHijacked
	}
	return http.ErrHandlerTimeout
}

// Write sends p unless the deadline has passed, in which case it returns
// http.ErrHandlerTimeout and p is discarded.
func (tw *timeoutWriter) Write(p []byte) (int, error) {
	if err := tw.claim(); err != nil {
		return 0, err
	}
	// Outside the lock: the deadline can then abort a write blocked on a
	// slow client. The state is committed, so nothing else writes to w.
	return tw.w.Write(p)
}

// claim commits the response to the handler if it is still open, or
// reports why the handler no longer owns it.
func (tw *timeoutWriter) claim() error {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	switch tw.state {
	case stateOpen:
		tw.commitLocked()
	case stateCommitted:
	default:
		return errAfterState(tw.state)
	}
	return nil
}

// FlushError flushes the response to the client, committing it: a later
// deadline aborts the connection instead of sending a 504.
func (tw *timeoutWriter) FlushError() error {
	if err := tw.claim(); err != nil {
		return err
	}
	return flushUnderlying(tw.w)
}

// Flush implements http.Flusher.
func (tw *timeoutWriter) Flush() { _ = tw.FlushError() }

func flushUnderlying(w http.ResponseWriter) error {
	switch f := w.(type) {
	case interface{ FlushError() error }:
		return f.FlushError()
	case http.Flusher:
		f.Flush()
		return nil
	}
	return http.NewResponseController(w).Flush()
}

// Hijack hands the connection to the handler. From then on the request is
// no longer timed: the deadline neither cancels its context nor touches
// the connection. After the deadline it fails with http.ErrHandlerTimeout.
func (tw *timeoutWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	switch tw.state {
	case stateOpen, stateCommitted:
	default:
		return nil, nil, errAfterState(tw.state)
	}
	conn, rw, err := http.NewResponseController(tw.w).Hijack()
	if err == nil {
		tw.state = stateHijacked
		tw.owner.untime()
	}
	return conn, rw, err
}

// Unwrap gives http.ResponseController the underlying writer for what the
// wrapper does not handle itself (read and write deadlines, full duplex).
func (tw *timeoutWriter) Unwrap() http.ResponseWriter { return tw.w }

// expireLocked acts on the deadline: a complete 504 if the response is
// still open, an abort if the handler committed. It reports whether the
// handler is now late (still running past its deadline).
func (tw *timeoutWriter) expireLocked() bool {
	switch tw.state {
	case stateOpen:
		h := tw.w.Header()
		for _, k := range tw.informKeys {
			delete(h, k)
		}
		h["Content-Type"] = jsonHeader["Content-Type"]
		h["Content-Length"] = []string{timeoutContentLength}
		h["Connection"] = []string{"close"}
		tw.w.WriteHeader(http.StatusGatewayTimeout)
		tw.w.Write(respTimeout.Body) //nolint:errcheck // the client may be gone
		_ = flushUnderlying(tw.w)
		tw.state = stateTimedOut
	case stateCommitted:
		tw.state = stateAborted
		// No further byte leaves: a write blocked on the client fails now,
		// and so does the final flush. HTTP/2 resets the stream at once.
		_ = http.NewResponseController(tw.w).SetWriteDeadline(time.Now())
	default:
		return false
	}
	// Release a handler blocked reading the request body.
	_ = http.NewResponseController(tw.w).SetReadDeadline(time.Now())
	return true
}

// finishLocked is the handler's return. completed is false when it
// panicked. expired says the request's time is up (the context ended with
// a timeout) in case no deadline callback ran. It returns the state before.
func (tw *timeoutWriter) finishLocked(completed, expired bool) writerState {
	s := tw.state
	tw.state = stateDone
	if !completed {
		return s
	}
	switch s {
	case stateOpen:
		if expired {
			tw.state = stateOpen
			tw.expireLocked()
			tw.state = stateDone
			return stateTimedOut
		}
		// The handler set fields but wrote nothing: net/http sends them
		// with an implicit 200.
		tw.copyHeaderLocked()
	case stateCommitted:
		tw.copyTrailersLocked()
	}
	return s
}

// copyTrailersLocked passes on trailer values the handler set, after it
// committed, in a header map it obtained before: net/http reads trailers
// only when the handler returns.
func (tw *timeoutWriter) copyTrailersLocked() {
	if len(tw.h) == 0 {
		return
	}
	dst := tw.w.Header()
	for k, v := range tw.h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			dst[k] = v
		}
	}
	for _, line := range tw.h["Trailer"] {
		for _, name := range strings.Split(line, ",") {
			k := http.CanonicalHeaderKey(strings.TrimSpace(name))
			if v, ok := tw.h[k]; ok {
				dst[k] = v
			}
		}
	}
}
