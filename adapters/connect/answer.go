package resilienceconnect

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"net/url"
	"strings"

	"connectrpc.com/connect"
)

// deadlineAnswer is a timed call's adapt.DeadlineAnswer: at its
// deadline inbound's engine has it answer DeadlineExceeded in the
// caller's protocol, with the TIMEOUT ErrorInfo detail, on a response
// nothing was sent to, or end a stream the handler started with the
// protocol's own end (gRPC's trailers, a gRPC-Web trailers envelope, a
// Connect end-of-stream envelope) when its body ends between two
// envelopes. Otherwise the engine aborts the stream: the client sees an
// incomplete response, never a whole one. It is part of the Call, so a
// timed call costs no allocation more.
type deadlineAnswer struct {
	m    *Middleware
	wire wire
	// The request's fields the answer needs, read before the handler
	// runs: connect's handler changes the request's header map.
	method                       string
	url                          *url.URL
	contentType, protocolVersion string
	answered                     bool // Answer or End answered: the handler may run on

	// Envelope tracking for the enveloped protocols (Sent): the response
	// can be ended in the protocol only between two envelopes.
	prefix     [5]byte
	prefixLen  int
	payloadRem uint32
}

// Answer writes DeadlineExceeded on the untouched response (over HTTP/1
// inbound has set Connection: close: the late handler may still read the
// body). Over gRPC it is a trailers-only response, as the rejections are:
// nothing of the handler's was sent, so there are no response headers to
// keep apart from the status.
func (a *deadlineAnswer) Answer(w http.ResponseWriter, cause error) {
	// The error writer reads the method and these fields to tell the
	// protocol.
	r := &http.Request{Method: a.method, URL: a.url, Header: http.Header{
		"Content-Type": {a.contentType}, "Connect-Protocol-Version": {a.protocolVersion}}}
	a.answered = true
	if a.wire == wireGRPC {
		a.m.writeTrailersOnly(w, r, a.m.rej.timeout)
		return
	}
	a.m.writeError(w, r, cause, a.m.rej.timeout)
}

// End ends a committed enveloped response with DeadlineExceeded, if the
// body so far ends on an envelope boundary.
func (a *deadlineAnswer) End(w http.ResponseWriter, _ error) bool {
	if !a.wire.enveloped() || !a.betweenEnvelopes() {
		return false
	}
	ends := &a.m.ends
	switch a.wire {
	case wireGRPC:
		h := w.Header()
		for k, v := range ends.grpc {
			h[http.TrailerPrefix+k] = v
		}
	case wireGRPCWeb:
		_, _ = w.Write(ends.grpcWeb)
	case wireConnectStream:
		_, _ = w.Write(ends.connect)
	}
	_ = http.NewResponseController(w).Flush()
	a.answered = true
	return true
}

// Streams reports whether the handler may send before it returns: every
// protocol but Connect's unary, whose handler writes the response only
// once the procedure has returned.
func (a *deadlineAnswer) Streams() bool { return a.wire != wireConnectUnary }

// Sent follows the body of an enveloped response as it is sent.
func (a *deadlineAnswer) Sent(p []byte) {
	if a.wire.enveloped() {
		a.track(p)
	}
}

// track follows the envelope boundaries (a flags byte and a big-endian
// uint32 length, then the payload) across writes.
func (a *deadlineAnswer) track(p []byte) {
	for len(p) > 0 {
		if a.payloadRem > 0 {
			k := min(uint32(len(p)), a.payloadRem)
			a.payloadRem -= k
			p = p[k:]
			continue
		}
		k := copy(a.prefix[a.prefixLen:], p)
		a.prefixLen += k
		p = p[k:]
		if a.prefixLen == len(a.prefix) {
			a.payloadRem = binary.BigEndian.Uint32(a.prefix[1:])
			a.prefixLen = 0
		}
	}
}

// betweenEnvelopes reports whether the body sent so far ends on an
// envelope boundary.
func (a *deadlineAnswer) betweenEnvelopes() bool { return a.prefixLen == 0 && a.payloadRem == 0 }

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
