package resilienceconnect

import (
	"context"
	"errors"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"github.com/ylcnfrht/resilience/core/retryafter"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/anypb"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail on every
// rejection; its reason is the inbound code (BULKHEAD_FULL, TIMEOUT,
// RATE_LIMITED, …) and its metadata["reason"] the limiter's reason (full,
// queue-timeout, dropped) when there is one.
const ErrorDomain = adapt.RPCErrorDomain

// CapacityRetryAfter is the default retry advice sent with a capacity
// rejection (Unavailable: full, queue timeout, dropped): Retry-After: 1,
// grpc-retry-pushback-ms: 1000 and a google.rpc.RetryInfo of one second,
// inbound.DefaultRetryAfter as the HTTP adapters' 503s. A queue is short
// by design, so a second is long enough for it to drain and short enough
// not to idle the server. inbound.Options.RetryAfter changes it; a
// negative value sends no advice.
const CapacityRetryAfter = inbound.DefaultRetryAfter

// pushbackName is the field through which a rejection tells a gRPC
// client's retry policy when to retry (adapt.RPCStatus.Pushback).
const pushbackName = "Grpc-Retry-Pushback-Ms"

// rejections holds the rendered errors whose content never changes, so a
// rejection costs no encoding of details. They are only read once built.
type rejections struct {
	advice time.Duration    // the capacity rejections' retry advice
	consts []*connect.Error // each constant adapt.RPCStatus's, at its Index
	// timeout is a custom pipeline's timeout, and the deadline's answer;
	// expired the caller's deadline, passed before the handler ran.
	timeout, expired *connect.Error
}

func newRejections(advice time.Duration) rejections {
	rs := rejections{advice: advice}
	for _, st := range adapt.RPCConstStatuses(advice) {
		rs.consts = append(rs.consts, newRejection(st))
	}
	rs.timeout = rs.consts[rs.index(resilience.ErrTimeoutRejected)]
	rs.expired = rs.consts[rs.index(context.DeadlineExceeded)]
	return rs
}

func (rs *rejections) index(err error) int {
	st, _ := adapt.RPCStatusOf(err, rs.advice)
	return st.Index
}

// newRejection renders st as a connect error: its ErrorInfo detail and,
// when it advises a wait, its RetryInfo detail and Retry-After; its
// grpc-retry-pushback-ms, if any.
func newRejection(st adapt.RPCStatus) *connect.Error {
	e := connect.NewError(connect.Code(st.Code), errors.New(st.Message))
	e.AddDetail(detail(st.ErrorInfo()))
	if ri, ok := st.RetryInfo(); ok {
		e.AddDetail(detail(ri))
		e.Meta().Set("Retry-After", retryafter.Format(st.RetryAfter))
	}
	if p := st.Pushback(); p != "" {
		e.Meta().Set(pushbackName, p)
	}
	return e
}

// rejection maps an error from inbound's Execute, for call r whose
// handler did not run, to the connect error to send, or nil when nothing
// must be sent (the client went away). A rate limit's carries the header
// fields in renders for it (Retry-After, RateLimit-*).
func (rs *rejections) rejection(in *adapt.Kit, r *http.Request, err error) *connect.Error {
	st, ok := adapt.RPCStatusOf(err, rs.advice)
	switch {
	case !ok:
		return nil
	case st.Index >= 0:
		return rs.consts[st.Index]
	}
	// The call arrived just now: its deadline leaves it all its timeout.
	if d, terr := callerTimeout(classify(r), r.Header); terr == nil {
		st = st.WithinDeadline(d)
	}
	e := newRejection(st)
	in.RPCFields(err, func(name string, v []string) { e.Meta()[name] = v })
	return e
}

func detail(d adapt.RPCDetail) *connect.ErrorDetail {
	cd, err := connect.NewErrorDetail(&anypb.Any{TypeUrl: d.TypeURL, Value: d.Value})
	if err != nil { // an Any is used as it is; this cannot fail
		panic(err)
	}
	return cd
}

// writeRejection sends e, the connect error for err, to a call whose
// handler did not run, on a response nothing was written to yet. Over gRPC
// it is a trailers-only response: status, details and retry advice in the
// one HEADERS frame that ends the stream, the only kind of failure a gRPC
// client's retry policy may retry (and whose pushback it reads). The
// other protocols get what writeError sends.
func (m *Middleware) writeRejection(w http.ResponseWriter, r *http.Request, err error, e *connect.Error) {
	if classify(r) != wireGRPC {
		m.writeError(w, r, err, e)
		return
	}
	m.writeTrailersOnly(w, r, e)
}

// writeTrailersOnly sends e to a gRPC call as a trailers-only response,
// on a response nothing was written to yet. connect's ErrorWriter
// declares the gRPC status fields as trailers and sets them after
// WriteHeader. Rendered straight into w's header map with its WriteHeader
// held back, they are moved to the headers by dropping the declaration,
// and no body follows: net/http sends one HEADERS frame with END_STREAM.
func (m *Middleware) writeTrailersOnly(w http.ResponseWriter, r *http.Request, e *connect.Error) {
	h := w.Header()
	_ = m.errw.Write(headerOnly{h}, r, e)
	delete(h, "Trailer")
	w.WriteHeader(http.StatusOK)
}

// headerOnly is a ResponseWriter that exposes a header map and drops the
// rest: what connect's ErrorWriter renders into it for gRPC is all header
// fields.
type headerOnly struct{ h http.Header }

func (o headerOnly) Header() http.Header       { return o.h }
func (headerOnly) WriteHeader(int)             {}
func (headerOnly) Write(p []byte) (int, error) { return len(p), nil }

// writeError sends e, the connect error for err, in the caller's protocol
// as connect's ErrorWriter renders it, on a response nothing was written
// to yet: over gRPC response headers then trailers (rejections and the
// deadline's answer use writeTrailersOnly instead), over gRPC-Web a
// trailers-only response, over Connect streaming an end-of-stream message,
// over the Connect protocol's unary mapping a status and JSON body, which
// Options.Render may restyle (given Connect's own response as the
// default, by adapt's rule for a faulty hook).
func (m *Middleware) writeError(w http.ResponseWriter, r *http.Request, err error, e *connect.Error) {
	if !m.in.Restyles() || classify(r) != wireConnectUnary {
		_ = m.errw.Write(w, r, e) // the client may be gone; nothing to do
		return
	}
	var cw captureWriter
	_ = m.errw.Write(&cw, r, e)
	adapt.WriteResponse(w, m.in.Restyle(err, inbound.Response{Status: cw.status, Header: cw.h, Body: cw.body}))
}

// captureWriter records the response connect's ErrorWriter writes, as the
// default a Render hook restyles.
type captureWriter struct {
	h      http.Header
	status int
	body   []byte
}

func (c *captureWriter) Header() http.Header {
	if c.h == nil {
		c.h = make(http.Header)
	}
	return c.h
}

func (c *captureWriter) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *captureWriter) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	c.body = append(c.body, p...)
	return len(p), nil
}
