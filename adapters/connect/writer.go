package resilienceconnect

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// timedWriter is the handler's ResponseWriter on a call with a deadline. The
// handler runs on a goroutine of its own, so that at the deadline the
// middleware can end the response in the caller's protocol and return from
// ServeHTTP (net/http ends a response, and sends gRPC's trailers, only
// then) while the handler keeps its permit until it returns.
//
// Every write to the real writer happens under mu, by the handler's
// goroutine before the deadline or by ServeHTTP's at it; after the deadline
// the writer is closed and the handler's writes fail with
// http.ErrHandlerTimeout. The handler's header map stays private (the
// handler may change it while ServeHTTP answers) and is copied to the real
// one when the response commits and when the handler returns, which is how
// gRPC's trailers reach net/http.
//
// The deadline is read from the handler's context under mu, not only
// signalled by expire: a handler woken by its context's end must find its
// writer already refusing, or it could complete the response after the
// deadline, before ServeHTTP gets to answer it.
type timedWriter struct {
	w    http.ResponseWriter
	rc   http.ResponseController
	wire wire
	ends *streamEnds         // how to end a committed stream at the deadline
	in   *inbound.Middleware // counts the late handler
	h    http.Header         // the handler's header map; only its goroutine touches it
	ctx  context.Context     // the handler's, set before it runs

	// sending is set while a write or flush to the client is under way
	// (mu held), so the deadline can tell a send that may be stuck on a
	// client that does not read from a short hold of mu.
	sending atomic.Bool

	mu        sync.Mutex
	committed bool   // status sent to the real writer
	closed    bool   // answered at the deadline: the handler's writes fail
	finished  bool   // the handler returned before the deadline: nothing to answer
	returned  bool   // the handler returned or panicked
	late      bool   // answered while the handler ran: counted in Stats.Late
	lateDone  func() // ends the count of a late handler; set with late
	gone      bool   // the handler returned, nothing written, its client gone

	// Envelope tracking for the enveloped protocols: the response can be
	// ended in the protocol only between two envelopes.
	prefix     [5]byte
	prefixLen  int
	payloadRem uint32
}

// refusing reports whether the handler's writes must fail: the deadline
// was answered or has passed.
func (tw *timedWriter) refusing() bool {
	return tw.closed || errors.Is(tw.ctx.Err(), context.DeadlineExceeded)
}

func (tw *timedWriter) Header() http.Header {
	if tw.h == nil {
		tw.h = make(http.Header)
	}
	return tw.h
}

// commitLocked copies the handler's header fields and sends the status.
func (tw *timedWriter) commitLocked(code int) {
	copyHeader(tw.w.Header(), tw.h)
	tw.w.WriteHeader(code)
	tw.committed = true
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}

func (tw *timedWriter) WriteHeader(code int) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.committed || tw.refusing() {
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		// An informational status does not commit the response.
		copyHeader(tw.w.Header(), tw.h)
		tw.w.WriteHeader(code)
		return
	}
	tw.commitLocked(code)
}

func (tw *timedWriter) Write(p []byte) (int, error) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.refusing() {
		return 0, http.ErrHandlerTimeout
	}
	if !tw.committed {
		tw.commitLocked(http.StatusOK)
	}
	tw.sending.Store(true)
	n, err := tw.w.Write(p)
	tw.sending.Store(false)
	if tw.wire.enveloped() {
		tw.track(p[:n])
	}
	return n, err
}

// track follows the envelope boundaries (a flags byte and a big-endian
// uint32 length, then the payload) across writes.
func (tw *timedWriter) track(p []byte) {
	for len(p) > 0 {
		if tw.payloadRem > 0 {
			k := min(uint32(len(p)), tw.payloadRem)
			tw.payloadRem -= k
			p = p[k:]
			continue
		}
		k := copy(tw.prefix[tw.prefixLen:], p)
		tw.prefixLen += k
		p = p[k:]
		if tw.prefixLen == len(tw.prefix) {
			tw.payloadRem = binary.BigEndian.Uint32(tw.prefix[1:])
			tw.prefixLen = 0
		}
	}
}

// betweenEnvelopes reports whether the body written so far ends on an
// envelope boundary.
func (tw *timedWriter) betweenEnvelopes() bool { return tw.prefixLen == 0 && tw.payloadRem == 0 }

// FlushError sends what was written to the client; http.ResponseController
// uses it.
func (tw *timedWriter) FlushError() error {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.refusing() {
		return http.ErrHandlerTimeout
	}
	if !tw.committed {
		tw.commitLocked(http.StatusOK)
	}
	tw.sending.Store(true)
	defer tw.sending.Store(false)
	return tw.rc.Flush()
}

// Flush implements http.Flusher, which connect requires of streaming
// handlers' writers.
func (tw *timedWriter) Flush() { _ = tw.FlushError() }

// Unwrap gives http.ResponseController the real writer for the deadlines
// and full duplex. Writes must go through the timedWriter.
func (tw *timedWriter) Unwrap() http.ResponseWriter { return tw.w }

// finish runs on the handler's goroutine when it returns: before the
// deadline, the header map, trailers included, goes to the real writer;
// after it, ServeHTTP answers, and a handler counted late is late no more.
// It reports whether the call was answered at its deadline while the
// handler ran on.
func (tw *timedWriter) finish() (late bool) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.returned = true
	if tw.refusing() {
		tw.endLate()
		return tw.late
	}
	tw.finished = true
	tw.gone = !tw.committed && errors.Is(tw.ctx.Err(), context.Canceled)
	copyHeader(tw.w.Header(), tw.h)
	return false
}

// markLate counts the handler late, unless it has returned: it is being
// answered while it runs on. Called with mu held, before the answer, so
// whoever sees the answer sees the late handler in Stats.
func (tw *timedWriter) markLate() {
	if tw.late = !tw.returned; tw.late {
		tw.lateDone = tw.in.CountLate()
	}
}

// endLate ends the count of a late handler that returned (mu held).
func (tw *timedWriter) endLate() {
	if tw.late {
		tw.lateDone()
	}
}

// finishPanic is finish for a handler that panicked. Before the deadline
// the panic is ServeHTTP's to raise (rethrow true); after it, the call is
// answered DeadlineExceeded and the panic only reported.
func (tw *timedWriter) finishPanic() (rethrow bool) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.returned = true
	if tw.refusing() {
		tw.endLate()
		return false
	}
	tw.finished = true
	return true
}

// expiry is what the deadline did to the response.
type expiry uint8

const (
	expiryNone     expiry = iota // the handler had returned: nothing done
	expiryAnswered               // the response is complete: return from ServeHTTP
	expiryAbort                  // it cannot be completed: abort the stream
)

// expire closes the writer at the deadline and ends the response in the
// caller's protocol: with the whole DeadlineExceeded error when nothing
// was sent, with the protocol's own end (trailers, a trailers envelope or
// an end-of-stream envelope) when the handler had streamed whole
// envelopes, and otherwise by aborting the stream. answer writes the error
// on the untouched real writer.
func (tw *timedWriter) expire(answer func(http.ResponseWriter)) expiry {
	if tw.sending.Load() {
		// A send is under way and may be stuck on a client that does not
		// read: unblock it. Nothing can be sent on time after this, so the
		// stream is aborted. (The handler cannot have finished: it was
		// sending at the deadline.)
		_ = tw.rc.SetWriteDeadline(time.Now())
		tw.mu.Lock()
		defer tw.mu.Unlock()
		tw.closed = true
		tw.markLate()
		return expiryAbort
	}
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.finished {
		return expiryNone
	}
	tw.closed = true
	tw.markLate()
	switch {
	case !tw.committed:
		answer(tw.w)
		return expiryAnswered
	case tw.wire.enveloped() && tw.betweenEnvelopes():
		tw.endStream()
		return expiryAnswered
	}
	return expiryAbort
}

// streamEnds are the ends of a committed stream at the deadline, one per
// enveloped protocol: the same DeadlineExceeded error, TIMEOUT ErrorInfo
// detail included, that a call answered before its response started gets.
// They are rendered once, by connect's own ErrorWriter, so each is what
// connect would send.
type streamEnds struct {
	grpc    http.Header // gRPC's trailer fields (Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin)
	grpcWeb []byte      // a gRPC-Web trailers envelope with the same fields
	connect []byte      // a Connect end-of-stream envelope
}

func newStreamEnds(errw *connect.ErrorWriter, e *connect.Error) streamEnds {
	render := func(contentType string) captureWriter {
		var cw captureWriter
		r := &http.Request{Method: http.MethodPost, Header: http.Header{"Content-Type": {contentType}}}
		_ = errw.Write(&cw, r, e) // into memory: cannot fail
		return cw
	}
	// gRPC and gRPC-Web write a trailers-only response: the fields are in
	// the header map.
	fields := render("application/grpc").h
	grpc := make(http.Header)
	web := make(http.Header)
	for k, v := range fields {
		if k == "Content-Type" || k == "Trailer" {
			continue
		}
		grpc[k] = v
		web[strings.ToLower(k)] = v // gRPC-Web trailers are lower-case
	}
	var b bytes.Buffer
	_ = web.Write(&b)
	return streamEnds{grpc: grpc, grpcWeb: envelope(0x80, b.String()), connect: render("application/connect+proto").body}
}

func envelope(flags byte, payload string) []byte {
	b := make([]byte, 5, 5+len(payload))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

// endStream ends a committed enveloped response with DeadlineExceeded.
func (tw *timedWriter) endStream() {
	switch tw.wire {
	case wireGRPC:
		h := tw.w.Header()
		for k, v := range tw.ends.grpc {
			h[http.TrailerPrefix+k] = v
		}
	case wireGRPCWeb:
		_, _ = tw.w.Write(tw.ends.grpcWeb)
	case wireConnectStream:
		_, _ = tw.w.Write(tw.ends.connect)
	}
	_ = tw.rc.Flush()
}
