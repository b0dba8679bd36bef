package resilienceconnect

import (
	"context"
	"errors"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"github.com/ylcnfrht/resilience/core/retryafter"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail on every
// rejection; its reason is the inbound code (BULKHEAD_FULL, TIMEOUT,
// RATE_LIMITED, …) and its metadata["reason"] the limiter's reason (full,
// queue-timeout, dropped) when there is one.
const ErrorDomain = "resilience"

// CapacityRetryAfter is the default retry advice sent with a capacity
// rejection (Unavailable: full, queue timeout, dropped): Retry-After: 1,
// grpc-retry-pushback-ms: 1000 and a google.rpc.RetryInfo of one second,
// inbound.DefaultRetryAfter as the HTTP adapters' 503s. A queue is short
// by design, so a second is long enough for it to drain and short enough
// not to idle the server. inbound.Options.RetryAfter changes it; a
// negative value sends no advice.
const CapacityRetryAfter = inbound.DefaultRetryAfter

// noRetry is the grpc-retry-pushback-ms value that tells a gRPC client not
// to retry (any negative number does): sent when a retry cannot succeed
// soon.
const noRetry = "-1"

// Messages sent to clients: inbound's, constant, never internal error
// text.
const (
	msgCapacity     = adapt.MessageCapacity
	msgShuttingDown = adapt.MessageShuttingDown
	msgTimeout      = adapt.MessageTimeout
	msgRate         = adapt.MessageRateLimited
	msgRejected     = adapt.MessageRejected
	msgInternal     = adapt.MessageInternal
	pushbackName    = "Grpc-Retry-Pushback-Ms"
)

// rejections holds the rendered errors whose content never changes, so a
// rejection costs no encoding of details. They are only read once built.
type rejections struct {
	full, queueTimeout, dropped, shuttingDown, timeout, expired, rejected, internal *connect.Error
}

func newRejections(retryAfter time.Duration) rejections {
	capacity := func(reason resilience.RejectReason) *connect.Error {
		return newRejection(connect.CodeUnavailable, msgCapacity, inbound.CodeBulkheadFull, string(reason), retryAfter)
	}
	return rejections{
		full:         capacity(resilience.ReasonFull),
		queueTimeout: capacity(resilience.ReasonQueueTimeout),
		dropped:      capacity(resilience.ReasonDropped),
		// Draining does not end: a retry here fails the same way, so the
		// client is told not to retry rather than when.
		shuttingDown: withoutRetry(newRejection(connect.CodeUnavailable, msgShuttingDown, inbound.CodeBulkheadFull, string(resilience.ReasonShuttingDown), 0)),
		timeout:      newRejection(connect.CodeDeadlineExceeded, msgTimeout, inbound.CodeTimeout, "", 0),
		// The caller's deadline passed before the handler ran: every
		// retry has the same deadline.
		expired:  withoutRetry(newRejection(connect.CodeDeadlineExceeded, msgTimeout, inbound.CodeTimeout, "", 0)),
		rejected: newRejection(connect.CodeUnavailable, msgRejected, inbound.CodeRejected, "", retryAfter),
		internal: newRejection(connect.CodeInternal, msgInternal, inbound.CodeInternal, "", 0),
	}
}

// newRejection builds a connect error with an ErrorInfo detail and, when
// retryAfter > 0, the retry advice as a RetryInfo detail and as Retry-After
// and grpc-retry-pushback-ms metadata.
func newRejection(code connect.Code, msg, infoReason, reason string, retryAfter time.Duration) *connect.Error {
	e := connect.NewError(code, errors.New(msg))
	e.AddDetail(errorInfo(infoReason, reason))
	if retryAfter > 0 {
		e.AddDetail(retryInfo(retryAfter))
		e.Meta().Set("Retry-After", retryafter.Format(retryAfter))
		// Rounded up: a retry at the pushback must not arrive before the
		// wait is over.
		e.Meta().Set(pushbackName, strconv.FormatInt(int64((retryAfter+time.Millisecond-1)/time.Millisecond), 10))
	}
	return e
}

// withoutRetry makes e tell gRPC clients not to retry: a negative
// grpc-retry-pushback-ms.
func withoutRetry(e *connect.Error) *connect.Error {
	e.Meta().Set(pushbackName, noRetry)
	return e
}

// rejection maps an error from inbound's Execute, for a call whose handler
// did not run, to the connect error to send, or nil when nothing must be
// sent (the client went away). in renders the rate limit's header fields
// (Retry-After, RateLimit-*).
func (rs *rejections) rejection(in *adapt.Kit, err error) *connect.Error {
	var bulk *resilience.ConcurrencyLimitRejectedError
	var rate *resilience.RateLimitRejectedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &rate):
		e := newRejection(connect.CodeResourceExhausted, msgRate, inbound.CodeRateLimited, "", rate.RetryAfter)
		if resp, ok := in.Render(err); ok {
			for k, v := range resp.Header {
				if k != "Content-Type" && k != "Connection" { // reject sets Connection on the response itself
					e.Meta()[k] = v
				}
			}
		}
		return e
	case errors.As(err, &bulk):
		switch bulk.Reason {
		case resilience.ReasonQueueTimeout:
			return rs.queueTimeout
		case resilience.ReasonDropped:
			return rs.dropped
		case resilience.ReasonShuttingDown:
			return rs.shuttingDown
		}
		return rs.full
	case errors.Is(err, resilience.ErrTimeoutRejected):
		// A custom pipeline's timeout strategy: its budget, not the
		// caller's, so a retry may fit.
		return rs.timeout
	case errors.Is(err, context.DeadlineExceeded):
		return rs.expired
	case errors.Is(err, context.Canceled):
		return nil
	case errors.Is(err, resilience.ErrRejected), errors.Is(err, resilience.ErrRateLimitStore):
		return rs.rejected
	}
	return rs.internal
}

// errorInfo encodes a google.rpc.ErrorInfo by hand, so the module needs no
// generated error-details package.
func errorInfo(infoReason, reason string) *connect.ErrorDetail {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType) // reason
	b = protowire.AppendString(b, infoReason)
	b = protowire.AppendTag(b, 2, protowire.BytesType) // domain
	b = protowire.AppendString(b, ErrorDomain)
	if reason != "" {
		var entry []byte // map<string, string> metadata entry
		entry = protowire.AppendTag(entry, 1, protowire.BytesType)
		entry = protowire.AppendString(entry, "reason")
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendString(entry, reason)
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, entry)
	}
	return detail("google.rpc.ErrorInfo", b)
}

// retryInfo encodes a google.rpc.RetryInfo with its retry_delay.
func retryInfo(d time.Duration) *connect.ErrorDetail {
	var dur []byte // google.protobuf.Duration
	if s := int64(d / time.Second); s != 0 {
		dur = protowire.AppendTag(dur, 1, protowire.VarintType)
		dur = protowire.AppendVarint(dur, uint64(s))
	}
	if n := int32(d % time.Second); n != 0 {
		dur = protowire.AppendTag(dur, 2, protowire.VarintType)
		dur = protowire.AppendVarint(dur, uint64(n))
	}
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, dur)
	return detail("google.rpc.RetryInfo", b)
}

func detail(typeName string, value []byte) *connect.ErrorDetail {
	d, err := connect.NewErrorDetail(&anypb.Any{TypeUrl: "type.googleapis.com/" + typeName, Value: value})
	if err != nil { // an Any is used as it is; this cannot fail
		panic(err)
	}
	return d
}

// writeRejection sends e, the connect error for err, to a call whose
// handler did not run, on a response nothing was written to yet. Over gRPC
// it is a trailers-only response: status, details and retry advice in the
// one HEADERS frame that ends the stream, the only kind of failure a gRPC
// client's retry policy may retry (and whose pushback it reads). The
// other protocols get what writeError sends.
func (m *Middleware) writeRejection(w http.ResponseWriter, r *http.Request, err error, e *connect.Error) {
	wi := classify(r)
	if rate, ok := errors.AsType[*resilience.RateLimitRejectedError](err); ok {
		// The call arrived just now; a wait that outlasts its deadline
		// leaves no retry that can succeed in it. Better the rejection now
		// than a client asleep until DEADLINE_EXCEEDED.
		if d, terr := callerTimeout(wi, r.Header); terr == nil && rate.RetryAfter >= d {
			e.Meta().Set(pushbackName, noRetry) // e is built for this call
		}
	}
	if wi != wireGRPC {
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
// default).
func (m *Middleware) writeError(w http.ResponseWriter, r *http.Request, err error, e *connect.Error) {
	if m.render == nil || classify(r) != wireConnectUnary {
		_ = m.errw.Write(w, r, e) // the client may be gone; nothing to do
		return
	}
	var cw captureWriter
	_ = m.errw.Write(&cw, r, e)
	def := inbound.Response{Status: cw.status, Header: cw.h, Body: cw.body}
	resp := m.render(err, def)
	if resp.Status < 100 || resp.Status > 999 {
		resp = def // a faulty hook cannot break the reply
	}
	adapt.WriteResponse(w, resp)
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
