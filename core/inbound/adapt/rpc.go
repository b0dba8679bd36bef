package adapt

import (
	"encoding/binary"
	"strconv"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/internal/kit"
)

// RPCErrorDomain is the domain of the google.rpc.ErrorInfo detail of
// every RPCStatus.
const RPCErrorDomain = "resilience"

// gRPC's status codes (connect.Code numbers them the same).
const (
	codeDeadlineExceeded  = 4
	codeResourceExhausted = 8
	codeInternal          = 13
	codeUnavailable       = 14
)

// RPCStatus is the answer of an RPC adapter (connect, gRPC) to a call
// the inbound pipeline refused, or whose deadline passed, in gRPC's
// terms: status code, message, error details and retry advice. Get it
// with RPCStatusOf, and render it in the framework's own form (a
// connect.Error, a grpc status and its trailers).
type RPCStatus struct {
	// Code is the gRPC status code: 4 DEADLINE_EXCEEDED, 8
	// RESOURCE_EXHAUSTED, 13 INTERNAL or 14 UNAVAILABLE.
	Code uint32
	// Message is the status message, one of the Message constants:
	// never an error's text.
	Message string
	// ErrorCode is the reason of the google.rpc.ErrorInfo detail:
	// inbound's code (inbound.CodeBulkheadFull, CodeTimeout, …).
	ErrorCode string
	// Reason is the concurrency limiter's reason (full, queue-timeout,
	// dropped, shutting-down), the ErrorInfo's metadata["reason"]; "" for
	// none.
	Reason string
	// RetryAfter, when positive, is the wait the client is advised: a
	// google.rpc.RetryInfo, Retry-After and grpc-retry-pushback-ms.
	RetryAfter time.Duration
	// NoRetry tells the client not to retry (grpc-retry-pushback-ms -1):
	// the server is draining, or the caller's own deadline has passed.
	NoRetry bool
	// Index is the status's place in RPCConstStatuses' list, for an
	// adapter that renders each constant status once; -1 for a rate
	// limit's, whose wait differs per call.
	Index int
}

// RPCStatusOf maps an error of the inbound pipeline for a call whose
// handler did not run to its end (from Execute, Serve or a deadline) to
// the status to answer with; ok is false when nothing must be sent (err
// is nil, or the client left: context.Canceled). advice is the capacity
// rejections' retry advice, Kit.CapacityRetryAfter (0 for none); a rate
// limit's is the limiter's wait.
func RPCStatusOf(err error, advice time.Duration) (st RPCStatus, ok bool) {
	switch r, rate := kit.Refuse(err); r {
	case kit.None:
		return RPCStatus{}, false
	case kit.RateLimited:
		return RPCStatus{Code: codeResourceExhausted, Message: MessageRateLimited, ErrorCode: inbound.CodeRateLimited,
			RetryAfter: rate.RetryAfter, Index: -1}, true
	default:
		return constStatus(r, advice), true
	}
}

// RPCConstStatuses returns every status RPCStatusOf gives but a rate
// limit's, each at its Index, for an adapter to render once when it is
// built; advice as for RPCStatusOf.
func RPCConstStatuses(advice time.Duration) []RPCStatus {
	out := make([]RPCStatus, len(constStatuses))
	for i := range out {
		out[i] = constStatus(kit.Full+kit.Refusal(i), advice)
	}
	return out
}

// constStatuses are the statuses of every refusal but None and
// RateLimited, at their Index (the refusal's place after kit.Full); a
// status whose RetryAfter is advised gets the capacity advice.
var constStatuses = [...]RPCStatus{
	capacityStatus(resilience.ReasonFull, 0),
	capacityStatus(resilience.ReasonQueueTimeout, 1),
	capacityStatus(resilience.ReasonDropped, 2),
	// A draining server will not take the call however long the client
	// waits: no advice but not to retry here.
	{Code: codeUnavailable, Message: MessageShuttingDown, ErrorCode: inbound.CodeBulkheadFull,
		Reason: string(resilience.ReasonShuttingDown), NoRetry: true, Index: 3},
	// A custom pipeline's timeout: its budget, not the caller's, so a
	// retry may fit.
	{Code: codeDeadlineExceeded, Message: MessageTimeout, ErrorCode: inbound.CodeTimeout, Index: 4},
	// The caller's own budget is spent: every retry has the same deadline.
	{Code: codeDeadlineExceeded, Message: MessageTimeout, ErrorCode: inbound.CodeTimeout, NoRetry: true, Index: 5},
	{Code: codeUnavailable, Message: MessageRejected, ErrorCode: inbound.CodeRejected, RetryAfter: advised, Index: 6},
	{Code: codeInternal, Message: MessageInternal, ErrorCode: inbound.CodeInternal, Index: 7},
}

// advised marks, in constStatuses, the RetryAfter the capacity advice
// takes the place of.
const advised = -1

func capacityStatus(reason resilience.RejectReason, index int) RPCStatus {
	return RPCStatus{Code: codeUnavailable, Message: MessageCapacity, ErrorCode: inbound.CodeBulkheadFull,
		Reason: string(reason), RetryAfter: advised, Index: index}
}

// constStatus is the status of every refusal but None and RateLimited.
func constStatus(r kit.Refusal, advice time.Duration) RPCStatus {
	s := constStatuses[r-kit.Full]
	if s.RetryAfter == advised {
		s.RetryAfter = max(advice, 0)
	}
	return s
}

// WithinDeadline returns s with NoRetry set when the wait it advises is
// not shorter than left, the time the caller's deadline leaves its call:
// a retry after the wait could only end in DEADLINE_EXCEEDED, so the
// client is better told at once than left asleep until then. Call it for
// a call with a deadline; a status advising no wait is returned as it is.
func (s RPCStatus) WithinDeadline(left time.Duration) RPCStatus {
	if s.RetryAfter > 0 && s.RetryAfter >= left {
		s.NoRetry = true
	}
	return s
}

// Pushback is the value of s's grpc-retry-pushback-ms field: "-1" when
// NoRetry, RetryAfter in milliseconds, rounded up so that a retry does
// not come before the wait is over, when positive, else "" (no field).
func (s RPCStatus) Pushback() string {
	switch {
	case s.NoRetry:
		return "-1"
	case s.RetryAfter > 0:
		return strconv.FormatInt(int64((s.RetryAfter+time.Millisecond-1)/time.Millisecond), 10)
	}
	return ""
}

// RPCDetail is a detail of an RPC status as a google.protobuf.Any holds
// it: the message's type URL and its protobuf encoding.
type RPCDetail struct {
	TypeURL string
	Value   []byte
}

// ErrorInfo is s's google.rpc.ErrorInfo detail: ErrorCode as its
// reason, RPCErrorDomain as its domain, and Reason, if any, as
// metadata["reason"].
func (s RPCStatus) ErrorInfo() RPCDetail {
	n := 4 + len(s.ErrorCode) + len(RPCErrorDomain)
	if s.Reason != "" {
		n += 16 + len(s.Reason)
	}
	b := make([]byte, 0, n)
	b = appendBytes(b, 1, s.ErrorCode) // reason
	b = appendBytes(b, 2, RPCErrorDomain)
	if s.Reason != "" {
		// A map<string, string> entry: key 1, value 2.
		var entry [64]byte
		e := appendBytes(appendBytes(entry[:0], 1, "reason"), 2, s.Reason)
		b = appendBytes(b, 3, e)
	}
	return RPCDetail{TypeURL: "type.googleapis.com/google.rpc.ErrorInfo", Value: b}
}

// RetryInfo is s's google.rpc.RetryInfo detail, its retry_delay
// RetryAfter; ok is false when RetryAfter is not positive (no detail).
func (s RPCStatus) RetryInfo() (d RPCDetail, ok bool) {
	if s.RetryAfter <= 0 {
		return RPCDetail{}, false
	}
	var dur []byte // google.protobuf.Duration: seconds 1, nanos 2
	if sec := uint64(s.RetryAfter / time.Second); sec != 0 {
		dur = binary.AppendUvarint(append(dur, 1<<3), sec)
	}
	if ns := uint64(s.RetryAfter % time.Second); ns != 0 {
		dur = binary.AppendUvarint(append(dur, 2<<3), ns)
	}
	return RPCDetail{TypeURL: "type.googleapis.com/google.rpc.RetryInfo", Value: appendBytes(nil, 1, dur)}, true
}

// appendBytes appends field num of wire type 2 (length-delimited) with
// the value v.
func appendBytes[V string | []byte](b []byte, num uint64, v V) []byte {
	b = binary.AppendUvarint(b, num<<3|2)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// RPCFields calls set with each header field of the response Render
// gives err that an RPC adapter sends as metadata with its status:
// Retry-After and the RateLimit fields of a rate limit's refusal. Not
// Content-Type, which describes the JSON body, nor Connection, which is
// no gRPC field (a draining server's GOAWAY moves its clients instead).
func (k *Kit) RPCFields(err error, set func(name string, values []string)) {
	resp, ok := k.Render(err)
	if !ok {
		return
	}
	for name, v := range resp.Header {
		if name != "Content-Type" && name != "Connection" {
			set(name, v)
		}
	}
}
