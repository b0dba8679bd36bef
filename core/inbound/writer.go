package inbound

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// writerState is where a timed response stands. Transitions happen under
// the request's timing.mu:
//
//	open ──handler flushes, or writes past the hold──▶ committed ──deadline──▶ aborted
//	  │                                                    │
//	  ├──deadline──▶ timedOut                              └──Hijack──▶ hijacked
//	  └──Hijack──▶ hijacked
//
// and every state ends in done when ServeHTTP returns, after which the
// underlying writer is never touched again. Under an adapter's answerer
// (ServeAnswering) the deadline in the open state sends the adapter's
// answer instead of the 504, and in the committed state the adapter ends
// the response in its protocol (timedOut) when no write is under way and
// it can, else it is aborted.
type writerState uint8

const (
	// stateOpen: nothing sent. The handler's header fields are still its
	// own map, and its status and first bytes are held by the writer, so a
	// 504 can replace the response entirely.
	stateOpen writerState = iota
	// stateCommitted: the handler's response went to the underlying
	// writer (it flushed, or wrote more than the writer holds back).
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

// holdLimit is how much of the body the writer holds back before it
// commits the response. A status written first and a small body do not
// commit: net/http would not have sent them yet either, and the 504 can
// still replace them. Only a Flush, or a body past the limit, commits.
const holdLimit = 4 << 10

// holdBufs recycles the hold buffers: a request with a small body then
// costs a copy, not an allocation.
var holdBufs = sync.Pool{New: func() any { b := make([]byte, 0, holdLimit); return &b }}

// timeoutWriter is the http.ResponseWriter a timed handler gets. It
// decides, under its request's engine's mutex (timing.mu), whether the
// response is the handler's or the middleware's 504, so that exactly one
// of them reaches the client and a late handler's writes are dropped
// without a data race on the underlying writer.
//
// Until the handler commits, its header map is private, and its status
// and up to holdLimit bytes of body are held here: the 504, written from
// the timer's goroutine, must neither carry the handler's fields nor touch
// a map the handler may be writing to, and a handler that wrote its status
// and then stalled must still get its 504 on time. After the commit,
// writes pass through as they come; the mutex is held only for the state
// change, not during the write, so a handler blocked writing to a slow
// client does not delay the deadline, which then releases it by setting
// the write deadline.
type timeoutWriter struct {
	w     http.ResponseWriter
	owner *timedRequest
	// ans, under ServeAnswering, answers the deadline in the adapter's
	// protocol and sees the body as it is sent. The handler's header map
	// then stays private after the commit too (the deadline may write
	// trailers to the underlying one), and sends are tracked (sending).
	ans deadlineAnswer

	// Touched only by the handler's goroutine.
	h          http.Header // the handler's fields until commit; nil until asked for
	hcommitted bool        // the handler committed (mirrors state for the handler)

	h1 bool // HTTP/1.x: the 504 closes the connection

	// Under owner.mu, the request's engine's (timing.mu).
	state    writerState
	answered bool    // the deadline answered: the 504 sent, or the committed response cut
	sending  bool    // under ans: a write or flush to w is under way, outside the lock
	copiedN  uint8   // how many of copied hold a field
	code     int16   // status held, not sent yet (0: none)
	status   int16   // the handler's status once committed (200 if implicit)
	body     *[]byte // body held, not sent yet (nil: none)
	// The fields copied to w before the commit (1xx, a held status), which
	// the 504 removes: the first few inline, so a usual header costs no
	// allocation, the rest in copiedMore.
	copied     [4]string
	copiedMore *[]string
}

// Header returns the handler's header map: private until the response is
// committed, the underlying one after (so trailers set late still work).
func (tw *timeoutWriter) Header() http.Header {
	if tw.hcommitted {
		return tw.w.Header()
	}
	if tw.h == nil {
		if tw.ans != nil {
			tw.h = headerMaps.Get().(http.Header)
		} else {
			tw.h = make(http.Header)
		}
	}
	return tw.h
}

// headerMaps recycles the handler's header maps under an answerer, which
// stay private to the timed writer: a call answered in time gives its map
// back, grown to the protocol's usual fields.
var headerMaps = sync.Pool{New: func() any { return make(http.Header) }}

// recycleHeaderLocked gives the private header map back once the handler
// returned in time and its fields were copied.
func (tw *timeoutWriter) recycleHeaderLocked() {
	if tw.ans == nil || tw.h == nil {
		return
	}
	clear(tw.h)
	headerMaps.Put(tw.h)
	tw.h = nil
}

// copyHeaderLocked copies the handler's fields to the underlying map,
// remembering them when the response is not committed yet so that a 504
// can remove them.
func (tw *timeoutWriter) copyHeaderLocked(remember bool) {
	if len(tw.h) == 0 {
		return
	}
	dst := tw.w.Header()
	for k, v := range tw.h {
		dst[k] = v
		if remember {
			tw.rememberLocked(k)
		}
	}
}

// rememberLocked notes that field k was copied to w before the commit.
func (tw *timeoutWriter) rememberLocked(k string) {
	if int(tw.copiedN) < len(tw.copied) {
		tw.copied[tw.copiedN] = k
		tw.copiedN++
		return
	}
	if tw.copiedMore == nil {
		tw.copiedMore = new([]string)
	}
	*tw.copiedMore = append(*tw.copiedMore, k)
}

// commitLocked makes the handler's response the response and hands back
// what was held, for the caller to send (outside the lock, unless the
// handler has returned).
func (tw *timeoutWriter) commitLocked() (code int, body *[]byte) {
	if tw.code == 0 {
		tw.copyHeaderLocked(false) // a held status copied them already
	}
	code, body = int(tw.code), tw.body
	tw.code, tw.body = 0, nil
	tw.state = stateCommitted
	tw.hcommitted = tw.ans == nil
	tw.status = http.StatusOK // Write or Flush without WriteHeader
	if code != 0 {
		tw.status = int16(code) // WriteHeader checked 100..999
	}
	return code, body
}

// sendHeld writes what commitLocked handed back.
func (tw *timeoutWriter) sendHeld(code int, body *[]byte) error {
	if code != 0 {
		tw.w.WriteHeader(code)
	}
	if body == nil {
		return nil
	}
	_, err := tw.w.Write(*body)
	*body = (*body)[:0]
	holdBufs.Put(body)
	return err
}

// dropHeldLocked discards what was held.
func (tw *timeoutWriter) dropHeldLocked() {
	tw.code = 0
	if tw.body != nil {
		*tw.body = (*tw.body)[:0]
		holdBufs.Put(tw.body)
		tw.body = nil
	}
}

// holdLocked keeps p back if it fits, and reports whether it did.
func (tw *timeoutWriter) holdLocked(p []byte) bool {
	if tw.body == nil {
		if len(p) > holdLimit {
			return false
		}
		tw.body = holdBufs.Get().(*[]byte)
	}
	if len(*tw.body)+len(p) > holdLimit {
		return false
	}
	*tw.body = append(*tw.body, p...)
	return true
}

// WriteHeader holds the status (and takes the handler's fields as they are
// now, as net/http does) until the response commits, unless the deadline
// has passed. 1xx informational responses are sent at once, as net/http
// does; 101 Switching Protocols commits.
func (tw *timeoutWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http does
	}
	tw.owner.mu.Lock()
	defer tw.owner.mu.Unlock()
	switch tw.state {
	case stateOpen:
		switch {
		case tw.code != 0:
			// Superfluous: the first status stands, as in net/http.
		case code < 200 && code != http.StatusSwitchingProtocols:
			tw.copyHeaderLocked(true)
			tw.w.WriteHeader(code)
		case code == http.StatusSwitchingProtocols:
			tw.code = int16(code)
			tw.copyHeaderLocked(false)
			c, body := tw.commitLocked()
			_ = tw.sendHeld(c, body)
		default:
			tw.code = int16(code)
			tw.copyHeaderLocked(true)
		}
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

// Write holds p while the response is open and the held body stays within
// holdLimit; past it, the response commits and p is sent. After the
// deadline it returns http.ErrHandlerTimeout and p is discarded.
func (tw *timeoutWriter) Write(p []byte) (int, error) {
	tw.owner.mu.Lock()
	switch tw.state {
	case stateOpen:
		if tw.holdLocked(p) {
			tw.owner.mu.Unlock()
			return len(p), nil
		}
		code, body := tw.commitLocked()
		tw.beginSendLocked(body, p)
		tw.owner.mu.Unlock()
		// Outside the lock: the deadline can then abort a write blocked
		// on a slow client. The state is committed, so nothing else
		// writes to w.
		if err := tw.sendHeld(code, body); err != nil {
			tw.endSend()
			return 0, err
		}
	case stateCommitted:
		tw.beginSendLocked(nil, p)
		tw.owner.mu.Unlock()
	default:
		s := tw.state
		tw.owner.mu.Unlock()
		return 0, errAfterState(s)
	}
	n, err := tw.w.Write(p)
	tw.endSend()
	return n, err
}

// beginSendLocked, under an answerer, shows it the body about to be sent
// (what was held, then p) and marks a send under way: the deadline then
// cuts the response rather than end it in the middle of this write.
func (tw *timeoutWriter) beginSendLocked(held *[]byte, p []byte) {
	if tw.ans == nil {
		return
	}
	if held != nil {
		tw.ans.Sent(*held)
	}
	if len(p) > 0 {
		tw.ans.Sent(p)
	}
	tw.sending = true
}

// endSend ends a send beginSendLocked began. A deadline that cut the
// response during it left the detached ServeHTTP waiting for this moment:
// the handler no longer touches w, so ServeHTTP may abort now.
func (tw *timeoutWriter) endSend() {
	if tw.ans == nil {
		return
	}
	tw.owner.mu.Lock()
	tw.sending = false
	if tw.state == stateAborted && tw.owner.detached != nil {
		tw.owner.detached.signalTimedOut(true)
	}
	tw.owner.mu.Unlock()
}

// FlushError sends what was held and flushes the response to the client,
// committing it: a later deadline aborts the connection instead of
// sending a 504.
func (tw *timeoutWriter) FlushError() error {
	tw.owner.mu.Lock()
	switch tw.state {
	case stateOpen:
		code, body := tw.commitLocked()
		tw.beginSendLocked(body, nil)
		tw.owner.mu.Unlock()
		if err := tw.sendHeld(code, body); err != nil {
			tw.endSend()
			return err
		}
	case stateCommitted:
		tw.beginSendLocked(nil, nil)
		tw.owner.mu.Unlock()
	default:
		s := tw.state
		tw.owner.mu.Unlock()
		return errAfterState(s)
	}
	err := flushUnderlying(tw.w)
	tw.endSend()
	return err
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
	tw.owner.mu.Lock()
	defer tw.owner.mu.Unlock()
	switch tw.state {
	case stateOpen:
		if tw.code != 0 || tw.body != nil {
			// net/http sends a written response before it hijacks.
			code, body := tw.commitLocked()
			_ = tw.sendHeld(code, body)
		}
	case stateCommitted:
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

// expireLocked acts on the deadline: a complete 504 (rendered through
// Options.Render) if the response is still open, an abort if the handler
// committed. It reports whether the
// handler is now late (still running past its deadline).
func (tw *timeoutWriter) expireLocked() bool {
	if tw.ans != nil {
		return tw.answerLocked()
	}
	switch tw.state {
	case stateOpen:
		h := tw.discardLocked()
		resp, length := tw.owner.timeoutResponse()
		for k, v := range resp.Header {
			h[k] = v
		}
		h["Content-Length"] = length
		if tw.h1 {
			// The late handler still owns the request's connection: the
			// client must not send another request on it.
			h["Connection"] = []string{"close"}
		}
		tw.w.WriteHeader(resp.Status)
		tw.w.Write(resp.Body) //nolint:errcheck // the client may be gone
		_ = flushUnderlying(tw.w)
		if !tw.h1 && tw.owner.detached == nil {
			// HTTP/2 ends a stream only when ServeHTTP returns. Handler
			// (and DetachHTTP2 around a framework) detaches the request
			// and returns once this 504 is out (see handler.go); under
			// Serve alone the framework owns the call, so the stream is
			// reset instead, and the client is not held until the
			// handler returns. The connection's other streams go on.
			_ = http.NewResponseController(tw.w).SetWriteDeadline(time.Now())
		}
		tw.state = stateTimedOut
	case stateCommitted:
		tw.state = stateAborted
		// No further byte leaves: a write blocked on the client fails now,
		// and so does the final flush. HTTP/2 resets the stream at once.
		_ = http.NewResponseController(tw.w).SetWriteDeadline(time.Now())
	default:
		return false
	}
	tw.answered = true
	// Release a handler blocked reading the request body.
	_ = http.NewResponseController(tw.w).SetReadDeadline(time.Now())
	return true
}

// discardLocked drops what the handler held and the fields it had copied
// to the underlying header map, so that the deadline's answer replaces the
// response whole; it returns that map.
func (tw *timeoutWriter) discardLocked() http.Header {
	tw.dropHeldLocked()
	h := tw.w.Header()
	for _, k := range tw.copied[:tw.copiedN] {
		delete(h, k)
	}
	if tw.copiedMore != nil {
		for _, k := range *tw.copiedMore {
			delete(h, k)
		}
	}
	return h
}

// answerLocked is expireLocked under an adapter's answerer: its whole
// answer if nothing was sent (on HTTP/1 with Connection: close, as the
// 504), its end of the committed response if no write is under way and
// the body allows it, else an abort. The detached ServeHTTP returns once
// the answer is whole, so nothing is flushed here.
func (tw *timeoutWriter) answerLocked() bool {
	cause := context.Cause(tw.owner.ctx())
	switch tw.state {
	case stateOpen:
		h := tw.discardLocked()
		if tw.h1 {
			h["Connection"] = []string{"close"}
		}
		if tw.owner.detached == nil {
			// ServeHTTP does not return before the late handler (an
			// HTTP/1 call that does not stream): the answer must be
			// complete by itself, so it goes out whole, with its length.
			tw.answerWholeLocked(h, cause)
		} else {
			tw.ans.Answer(tw.w, cause)
		}
		tw.state = stateTimedOut
	case stateCommitted:
		// In place (an HTTP/1 call that does not stream, committing only
		// as it returns) there is no end to send but the handler's own.
		if tw.owner.detached != nil && !tw.sending && tw.ans.End(tw.w, cause) {
			tw.state = stateTimedOut
			break
		}
		tw.state = stateAborted
		// A write blocked on the client fails now; the stream is reset
		// (the connection closed) when ServeHTTP aborts.
		_ = http.NewResponseController(tw.w).SetWriteDeadline(time.Now())
	default:
		return false
	}
	tw.answered = true
	return true
}

// answerWholeLocked has the answerer write its answer into a buffer and
// sends it with Content-Length, flushed, so that the client has all of it
// while the handler runs on; a handler blocked reading the body is
// released, as by the 504.
func (tw *timeoutWriter) answerWholeLocked(h http.Header, cause error) {
	b := wholeAnswer{h: h}
	tw.ans.Answer(&b, cause)
	if b.code == 0 {
		b.code = http.StatusOK
	}
	h["Content-Length"] = []string{strconv.Itoa(len(b.body))}
	tw.w.WriteHeader(b.code)
	tw.w.Write(b.body) //nolint:errcheck // the client may be gone
	_ = flushUnderlying(tw.w)
	_ = http.NewResponseController(tw.w).SetReadDeadline(time.Now())
}

// wholeAnswer is the writer an answerer writes a whole answer to: the
// response's header map, and its status and body held.
type wholeAnswer struct {
	h    http.Header
	code int
	body []byte
}

func (b *wholeAnswer) Header() http.Header { return b.h }

func (b *wholeAnswer) WriteHeader(code int) {
	if b.code == 0 && code >= 200 {
		b.code = code
	}
}

func (b *wholeAnswer) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	b.body = append(b.body, p...)
	return len(p), nil
}

// finishLocked is the handler's return. completed is false when it
// panicked. expired says the request's time is up (the context ended with
// a timeout) in case no deadline callback ran. It returns the state before.
func (tw *timeoutWriter) finishLocked(completed, expired bool) writerState {
	s := tw.state
	if !completed {
		tw.dropHeldLocked() // net/http sends nothing for a panicking handler
		tw.state = stateDone
		return s
	}
	switch s {
	case stateOpen:
		if expired {
			tw.expireLocked()
			tw.state = stateDone
			return stateTimedOut
		}
		// The handler returned in time: what it held is its response
		// (with no status or body, net/http sends its fields with an
		// implicit 200). The state is done first, so a deadline firing
		// now leaves the writer alone.
		code, body := tw.commitLocked()
		tw.state = stateDone
		_ = tw.sendHeld(code, body)
		tw.copyTrailersLocked()
		tw.recycleHeaderLocked()
	case stateCommitted:
		if expired && tw.ans != nil {
			// The adapter ends the response in its protocol, as at the
			// deadline, rather than let the late return end it.
			tw.answerLocked()
			s = tw.state
			tw.state = stateDone
			return s
		}
		tw.state = stateDone
		tw.copyTrailersLocked()
		tw.recycleHeaderLocked()
	default:
		tw.state = stateDone
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

// statusWriter records the response status for the adaptive limiter when
// no timeout is configured (the timed writer records it otherwise). It
// passes everything through: Flush and Hijack as the interfaces handlers
// assert, and the rest (deadlines, full duplex) through Unwrap and
// http.ResponseController. It is used by the handler's goroutine only;
// after Hijack it records nothing more.
type statusWriter struct {
	w        http.ResponseWriter
	status   int
	hijacked bool
}

func (sw *statusWriter) Header() http.Header { return sw.w.Header() }

// WriteHeader records the first final status; 1xx responses are
// informational and do not count.
func (sw *statusWriter) WriteHeader(code int) {
	if sw.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		sw.status = code
	}
	sw.w.WriteHeader(code)
}

// Write records the implicit 200 of a response without WriteHeader.
func (sw *statusWriter) Write(p []byte) (int, error) {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	return sw.w.Write(p)
}

// FlushError flushes the underlying writer; flushing commits an implicit
// 200.
func (sw *statusWriter) FlushError() error {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	return flushUnderlying(sw.w)
}

// Flush implements http.Flusher.
func (sw *statusWriter) Flush() { _ = sw.FlushError() }

// Hijack hands the connection to the handler; the request is then not
// counted by the limiter.
func (sw *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(sw.w).Hijack()
	if err == nil {
		sw.hijacked = true
	}
	return conn, rw, err
}

// Unwrap gives http.ResponseController the underlying writer.
func (sw *statusWriter) Unwrap() http.ResponseWriter { return sw.w }
