package resiliencegrpc

import (
	"context"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"github.com/ylcnfrht/resilience/core/retryafter"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail on every
// rejection; its reason is the inbound code (BULKHEAD_FULL, TIMEOUT,
// RATE_LIMITED, …) and its metadata["reason"] the limiter's reason (full,
// queue-timeout, dropped, shutting-down) when there is one.
const ErrorDomain = adapt.RPCErrorDomain

// CapacityRetryAfter is the default retry advice of a capacity rejection
// (UNAVAILABLE, reason full, queue-timeout or dropped) and of a custom
// pipeline's rejection: a google.rpc.RetryInfo of one second,
// grpc-retry-pushback-ms: 1000 and retry-after: 1, inbound.DefaultRetryAfter
// as the HTTP adapters' 503s. A queue is short by design, so a second is
// long enough for it to drain and short enough not to idle the server.
// inbound.Options.RetryAfter changes it; a negative value sends no advice.
const CapacityRetryAfter = inbound.DefaultRetryAfter

// PushbackTrailer is the trailer through which a rejection tells a gRPC
// client's retry policy how long to wait before its next attempt, in
// milliseconds; a negative value tells it not to retry.
const PushbackTrailer = "grpc-retry-pushback-ms"

// rejection is a rendered rejection whose content never changes: the
// status (details encoded once), its error and the trailers that go with
// it. Shared between calls: read only.
type rejection struct {
	st      *status.Status
	err     error       // st.Err(), made once: a status error is immutable
	trailer metadata.MD // nil: none
}

// rejections holds the constant rejections, built once per middleware and
// only read afterwards.
type rejections struct {
	advice time.Duration // the capacity rejections' retry advice
	consts []rejection   // each constant adapt.RPCStatus's, at its Index
}

// newRejections renders the constant rejections of in. Their retry advice
// is in's (Options.RetryAfter), and the retry-after field of the capacity
// rejections the one in's own 503s carry.
func newRejections(in *adapt.Kit) rejections {
	rs := rejections{advice: in.CapacityRetryAfter()}
	for _, st := range adapt.RPCConstStatuses(rs.advice) {
		rs.consts = append(rs.consts, newRejection(st))
	}
	return rs
}

// newRejection renders st as a status with its ErrorInfo detail and, when
// it advises a wait, its RetryInfo detail, and its pushback trailer (a
// negative one when NoRetry). A constant status's advice goes out as
// retry-after too, as in's 503s carry it; a rate limit's comes with the
// fields RPCFields gives.
func newRejection(st adapt.RPCStatus) rejection {
	p := &spb.Status{Code: int32(st.Code), Message: st.Message, Details: []*anypb.Any{detail(st.ErrorInfo())}}
	var r rejection
	if ri, ok := st.RetryInfo(); ok {
		p.Details = append(p.Details, detail(ri))
		if st.Index >= 0 {
			r.trailer = metadata.MD{"retry-after": {retryafter.Format(st.RetryAfter)}}
		}
	}
	if v := st.Pushback(); v != "" {
		if r.trailer == nil {
			r.trailer = metadata.MD{}
		}
		r.trailer[PushbackTrailer] = []string{v}
	}
	r.st = status.FromProto(p)
	r.err = r.st.Err()
	return r
}

func detail(d adapt.RPCDetail) *anypb.Any { return &anypb.Any{TypeUrl: d.TypeURL, Value: d.Value} }

// rejectionFor maps an error from inbound's Execute, for a call that never
// reached its handler, to what to send; ok is false when nothing must be
// sent (the client went away).
func (rs *rejections) rejectionFor(ctx context.Context, in *adapt.Kit, err error) (rejection, bool) {
	st, ok := adapt.RPCStatusOf(err, rs.advice)
	switch {
	case !ok:
		return rejection{}, false
	case st.Index >= 0:
		return rs.consts[st.Index], true
	}
	return rateRejection(ctx, in, err, st), true
}

// msgRateLimited is the grpc-message of a rate-limited call
// (RESOURCE_EXHAUSTED). It names where a gRPC client finds the wait: the
// RetryInfo detail's retry_delay, and the grpc-retry-pushback-ms trailer
// that grpc-go's retry policy reads (-1 when no retry can succeed in the
// caller's deadline). adapt.MessageRateLimited, the HTTP adapters'
// message, names the Retry-After header instead.
const msgRateLimited = "Too many requests; retry after the delay in the RetryInfo detail (grpc-retry-pushback-ms)."

// rateRejection is the RESOURCE_EXHAUSTED of a rate-limited call, st: its
// RetryInfo and pushback are the limiter's wait (a millisecond at least),
// and the fields inbound renders for it (Retry-After, RateLimit-*) go out
// as trailers. A wait that outlasts the caller's deadline gets a pushback
// of -1: a retry could only end in DEADLINE_EXCEEDED, so the client is
// better told at once.
func rateRejection(ctx context.Context, in *adapt.Kit, err error, st adapt.RPCStatus) rejection {
	st.Message = msgRateLimited
	st.RetryAfter = max(st.RetryAfter, time.Millisecond)
	if dl, ok := ctx.Deadline(); ok {
		st = st.WithinDeadline(time.Until(dl))
	}
	r := newRejection(st)
	trailer := r.trailer // not nil: the wait is positive
	in.RPCFields(err, func(name string, v []string) { trailer[adapt.FieldKey(name)] = v })
	return r
}

// send sets r's trailers, and the RateLimit fields held for the call when
// held is not nil, on the call and returns r's status error, for the
// handler to return. Nothing was sent on the call before, so grpc-go sends
// it all as one trailers-only response.
func (r rejection) send(ctx context.Context, held *rpc) error {
	trailer := r.trailer
	if held != nil {
		trailer = held.take(trailer)
	}
	if trailer != nil {
		_ = grpc.SetTrailer(ctx, trailer) // no stream in ctx: nothing to set
	}
	return r.err
}
