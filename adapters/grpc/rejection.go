package resiliencegrpc

import (
	"context"
	"errors"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail on every
// rejection; its reason is the inbound code (BULKHEAD_FULL, TIMEOUT,
// RATE_LIMITED, …) and its metadata["reason"] the limiter's reason (full,
// queue-timeout, dropped, shutting-down) when there is one.
const ErrorDomain = "resilience"

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
	full, queueTimeout, dropped, shuttingDown, timeout, callerTimeout, rejected, internal rejection
}

// newRejections renders the constant rejections of in. Their retry advice
// is in's (Options.RetryAfter), and the retry-after field of the capacity
// rejections the one in's own 503s carry.
func newRejections(in *adapt.Kit) rejections {
	advice := in.CapacityRetryAfter()
	capacity := func(reason resilience.RejectReason) rejection {
		r := newRejection(codes.Unavailable, adapt.MessageCapacity, inbound.CodeBulkheadFull, string(reason), advice)
		return r.withFields(in, &resilience.ConcurrencyLimitRejectedError{Reason: reason})
	}
	return rejections{
		full:         capacity(resilience.ReasonFull),
		queueTimeout: capacity(resilience.ReasonQueueTimeout),
		dropped:      capacity(resilience.ReasonDropped),
		// A draining server will not take the call however long the
		// client waits: a negative pushback stops the retry policy on
		// this server, and the client's load balancer moves on once
		// GracefulStop's GOAWAY arrives. No retry-after, which would say
		// the opposite.
		shuttingDown: newRejection(codes.Unavailable, adapt.MessageShuttingDown, inbound.CodeBulkheadFull, string(resilience.ReasonShuttingDown), -1),
		timeout:      newRejection(codes.DeadlineExceeded, adapt.MessageTimeout, inbound.CodeTimeout, "", 0),
		// The caller's own budget is spent: a retry cannot help.
		callerTimeout: newRejection(codes.DeadlineExceeded, adapt.MessageTimeout, inbound.CodeTimeout, "", -1),
		rejected:      newRejection(codes.Unavailable, adapt.MessageRejected, inbound.CodeRejected, "", advice).withFields(in, resilience.ErrRejected),
		internal:      newRejection(codes.Internal, adapt.MessageInternal, inbound.CodeInternal, "", 0),
	}
}

// newRejection builds a status with an ErrorInfo detail and, when
// retryAfter > 0, a RetryInfo detail and the pushback trailer; a negative
// retryAfter sends a pushback of -1 (do not retry) and no RetryInfo.
func newRejection(code codes.Code, msg, infoReason, reason string, retryAfter time.Duration) rejection {
	info := &errdetails.ErrorInfo{Reason: infoReason, Domain: ErrorDomain}
	if reason != "" {
		info.Metadata = map[string]string{"reason": reason}
	}
	st := status.New(code, msg)
	var r rejection
	switch {
	case retryAfter > 0:
		st = withDetails(st, info, &errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)})
		// Rounded up: a retry at the pushback must not come before the
		// wait is over.
		r.trailer = metadata.Pairs(PushbackTrailer, strconv.FormatInt(int64((retryAfter+time.Millisecond-1)/time.Millisecond), 10))
	case retryAfter < 0:
		st = withDetails(st, info)
		r.trailer = metadata.Pairs(PushbackTrailer, "-1")
	default:
		st = withDetails(st, info)
	}
	r.st, r.err = st, st.Err()
	return r
}

// withFields adds the header fields of in's response for err (Retry-After,
// RateLimit-*; not its Content-Type nor Connection) to r's trailers, as
// metadata keys in lower case.
func (r rejection) withFields(in *adapt.Kit, err error) rejection {
	resp, ok := in.Render(err)
	if !ok {
		return r
	}
	for k, v := range resp.Header {
		if k == "Content-Type" || k == "Connection" {
			// Connection is no gRPC field (grpc-go's clients refuse
			// it); GracefulStop's GOAWAY moves the clients instead.
			continue
		}
		if r.trailer == nil {
			r.trailer = metadata.MD{}
		}
		r.trailer[mdKey(k)] = v
	}
	return r
}

// mdKey is the metadata key of a header field inbound sets, without
// allocating for the ones it sets per call.
func mdKey(name string) string {
	switch name {
	case "Retry-After":
		return "retry-after"
	case "Ratelimit-Limit":
		return "ratelimit-limit"
	case "Ratelimit-Remaining":
		return "ratelimit-remaining"
	case "Ratelimit-Reset":
		return "ratelimit-reset"
	case "Ratelimit-Policy":
		return "ratelimit-policy"
	case "Ratelimit":
		return "ratelimit"
	}
	return strings.ToLower(name)
}

// withDetails attaches details to st. Every detail is a well-formed
// message of a registered type and st is not OK, so this cannot fail.
func withDetails(st *status.Status, details ...protoadapt.MessageV1) *status.Status {
	s, err := st.WithDetails(details...)
	if err != nil {
		panic(err)
	}
	return s
}

// rejectionFor maps an error from inbound's Execute, for a call that never
// reached its handler, to what to send; ok is false when nothing must be
// sent (the client went away).
func (rs *rejections) rejectionFor(ctx context.Context, in *adapt.Kit, err error) (rejection, bool) {
	if err == nil {
		return rejection{}, false
	}
	if rate, ok := errors.AsType[*resilience.RateLimitRejectedError](err); ok {
		return rateRejection(ctx, in, err, rate), true
	}
	if bulk, ok := errors.AsType[*resilience.ConcurrencyLimitRejectedError](err); ok {
		switch bulk.Reason {
		case resilience.ReasonQueueTimeout:
			return rs.queueTimeout, true
		case resilience.ReasonDropped:
			return rs.dropped, true
		case resilience.ReasonShuttingDown:
			return rs.shuttingDown, true
		}
		return rs.full, true
	}
	switch {
	case errors.Is(err, resilience.ErrTimeoutRejected):
		return rs.timeout, true
	case errors.Is(err, context.DeadlineExceeded):
		return rs.callerTimeout, true
	case errors.Is(err, context.Canceled):
		return rejection{}, false
	case errors.Is(err, resilience.ErrRejected), errors.Is(err, resilience.ErrRateLimitStore):
		return rs.rejected, true
	}
	return rs.internal, true
}

// msgRateLimited is the grpc-message of a rate-limited call
// (RESOURCE_EXHAUSTED). It names where a gRPC client finds the wait: the
// RetryInfo detail's retry_delay, and the grpc-retry-pushback-ms trailer
// that grpc-go's retry policy reads (-1 when no retry can succeed in the
// caller's deadline). adapt.MessageRateLimited, the HTTP adapters'
// message, names the Retry-After header instead.
const msgRateLimited = "Too many requests; retry after the delay in the RetryInfo detail (grpc-retry-pushback-ms)."

// rateRejection is the RESOURCE_EXHAUSTED of a rate-limited call: its
// RetryInfo and pushback are the limiter's wait, and the fields inbound
// renders for it (Retry-After, RateLimit-*) go out as trailers. A wait
// that outlasts the caller's deadline gets a pushback of -1: a retry could
// only end in DEADLINE_EXCEEDED, so the client is better told at once.
func rateRejection(ctx context.Context, in *adapt.Kit, err error, rate *resilience.RateLimitRejectedError) rejection {
	wait := max(rate.RetryAfter, time.Millisecond)
	r := newRejection(codes.ResourceExhausted, msgRateLimited, inbound.CodeRateLimited, "", wait)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		r.trailer[PushbackTrailer] = []string{"-1"}
	}
	return r.withFields(in, err)
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
