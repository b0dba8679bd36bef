package adapt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// TestRPCStatusOf: every error of the pipeline maps to its gRPC status,
// message, ErrorInfo reason and retry advice; a wrapped error maps as the
// error it wraps; no message carries an error's text.
func TestRPCStatusOf(t *testing.T) {
	const advice = 2 * time.Second
	capacity := func(reason string, index int) adapt.RPCStatus {
		return adapt.RPCStatus{Code: 14, Message: adapt.MessageCapacity, ErrorCode: inbound.CodeBulkheadFull, Reason: reason, RetryAfter: advice, Index: index}
	}
	timeout := adapt.RPCStatus{Code: 4, Message: adapt.MessageTimeout, ErrorCode: inbound.CodeTimeout, Index: 4}
	callerDeadline := adapt.RPCStatus{Code: 4, Message: adapt.MessageTimeout, ErrorCode: inbound.CodeTimeout, NoRetry: true, Index: 5}
	rejected := adapt.RPCStatus{Code: 14, Message: adapt.MessageRejected, ErrorCode: inbound.CodeRejected, RetryAfter: advice, Index: 6}
	internal := adapt.RPCStatus{Code: 13, Message: adapt.MessageInternal, ErrorCode: inbound.CodeInternal, Index: 7}
	tests := []struct {
		name string
		err  error
		want adapt.RPCStatus
		ok   bool
	}{
		{"nil", nil, adapt.RPCStatus{}, false},
		{"canceled", context.Canceled, adapt.RPCStatus{}, false},
		{"rate limited", &resilience.RateLimitRejectedError{RetryAfter: 1500 * time.Millisecond},
			adapt.RPCStatus{Code: 8, Message: adapt.MessageRateLimited, ErrorCode: inbound.CodeRateLimited, RetryAfter: 1500 * time.Millisecond, Index: -1}, true},
		{"rate limited, no wait", &resilience.RateLimitRejectedError{},
			adapt.RPCStatus{Code: 8, Message: adapt.MessageRateLimited, ErrorCode: inbound.CodeRateLimited, Index: -1}, true},
		{"full", &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonFull}, capacity("full", 0), true},
		{"no reason", &resilience.ConcurrencyLimitRejectedError{}, capacity("full", 0), true},
		{"queue timeout", &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonQueueTimeout}, capacity("queue-timeout", 1), true},
		{"dropped", &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonDropped}, capacity("dropped", 2), true},
		{"shutting down", &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonShuttingDown},
			adapt.RPCStatus{Code: 14, Message: adapt.MessageShuttingDown, ErrorCode: inbound.CodeBulkheadFull, Reason: "shutting-down", NoRetry: true, Index: 3}, true},
		{"timeout", &resilience.TimeoutRejectedError{Timeout: time.Second}, timeout, true},
		{"timeout sentinel", resilience.ErrTimeoutRejected, timeout, true},
		{"caller deadline", context.DeadlineExceeded, callerDeadline, true},
		{"rejected", resilience.ErrRejected, rejected, true},
		{"store failed closed", resilience.ErrRateLimitStore, rejected, true},
		{"internal", errors.New("db password is hunter2"), internal, true},
		{"wrapped full", fmt.Errorf("pipeline: %w", &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonDropped}), capacity("dropped", 2), true},
		{"wrapped canceled", fmt.Errorf("queue: %w", context.Canceled), adapt.RPCStatus{}, false},
		{"wrapped deadline", fmt.Errorf("queue: %w", context.DeadlineExceeded), callerDeadline, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := adapt.RPCStatusOf(tc.err, advice)
			if got != tc.want || ok != tc.ok {
				t.Errorf("RPCStatusOf = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
			if tc.err != nil && got.Message != "" && bytes.Contains([]byte(got.Message), []byte(tc.err.Error())) {
				t.Errorf("message %q carries the error's text", got.Message)
			}
		})
	}
}

// TestRPCStatusOfAdvice: the capacity advice goes to the capacity and
// rejected statuses only; none (0, or a negative value) leaves them
// without.
func TestRPCStatusOfAdvice(t *testing.T) {
	full := &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonFull}
	for _, tc := range []struct {
		advice, want time.Duration
	}{{0, 0}, {-1, 0}, {time.Second, time.Second}, {250 * time.Millisecond, 250 * time.Millisecond}} {
		for _, err := range []error{full, resilience.ErrRejected} {
			if st, _ := adapt.RPCStatusOf(err, tc.advice); st.RetryAfter != tc.want {
				t.Errorf("RPCStatusOf(%v, %v).RetryAfter = %v, want %v", err, tc.advice, st.RetryAfter, tc.want)
			}
		}
	}
	for _, err := range []error{resilience.ErrTimeoutRejected, context.DeadlineExceeded, errors.New("x"),
		&resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonShuttingDown}} {
		if st, _ := adapt.RPCStatusOf(err, time.Second); st.RetryAfter != 0 {
			t.Errorf("RPCStatusOf(%v).RetryAfter = %v, want none", err, st.RetryAfter)
		}
	}
}

// TestRPCConstStatuses: each constant status stands at its Index, and is
// the one RPCStatusOf gives.
func TestRPCConstStatuses(t *testing.T) {
	errs := []error{
		&resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonFull},
		&resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonQueueTimeout},
		&resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonDropped},
		&resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonShuttingDown},
		resilience.ErrTimeoutRejected,
		context.DeadlineExceeded,
		resilience.ErrRejected,
		errors.New("x"),
	}
	all := adapt.RPCConstStatuses(time.Second)
	if len(all) != len(errs) {
		t.Fatalf("%d constant statuses, want %d", len(all), len(errs))
	}
	for i, err := range errs {
		st, _ := adapt.RPCStatusOf(err, time.Second)
		if all[i] != st || st.Index != i {
			t.Errorf("status %d = %+v; RPCStatusOf(%v) = %+v", i, all[i], err, st)
		}
	}
}

func TestRPCStatusPushback(t *testing.T) {
	for _, tc := range []struct {
		st   adapt.RPCStatus
		want string
	}{
		{adapt.RPCStatus{}, ""},
		{adapt.RPCStatus{RetryAfter: time.Second}, "1000"},
		{adapt.RPCStatus{RetryAfter: 1500*time.Microsecond + 1}, "2"},
		{adapt.RPCStatus{RetryAfter: 1}, "1"},
		{adapt.RPCStatus{NoRetry: true}, "-1"},
		{adapt.RPCStatus{RetryAfter: time.Second, NoRetry: true}, "-1"},
	} {
		if got := tc.st.Pushback(); got != tc.want {
			t.Errorf("%+v.Pushback() = %q, want %q", tc.st, got, tc.want)
		}
	}
}

// TestRPCStatusDetails: the details' encodings, byte for byte, as
// protobuf encodes google.rpc.ErrorInfo and google.rpc.RetryInfo.
func TestRPCStatusDetails(t *testing.T) {
	info := adapt.RPCStatus{ErrorCode: "TIMEOUT"}.ErrorInfo()
	want := append(append([]byte{0x0a, 7}, "TIMEOUT"...), append([]byte{0x12, 10}, "resilience"...)...)
	if info.TypeURL != "type.googleapis.com/google.rpc.ErrorInfo" || !bytes.Equal(info.Value, want) {
		t.Errorf("ErrorInfo = %q %x, want %x", info.TypeURL, info.Value, want)
	}
	info = adapt.RPCStatus{ErrorCode: "BULKHEAD_FULL", Reason: "full"}.ErrorInfo()
	entry := append(append([]byte{0x0a, 6}, "reason"...), append([]byte{0x12, 4}, "full"...)...)
	want = append(append([]byte{0x0a, 13}, "BULKHEAD_FULL"...), append([]byte{0x12, 10}, "resilience"...)...)
	want = append(append(want, 0x1a, byte(len(entry))), entry...)
	if !bytes.Equal(info.Value, want) {
		t.Errorf("ErrorInfo with a reason = %x, want %x", info.Value, want)
	}
	for _, tc := range []struct {
		d    time.Duration
		want []byte
	}{
		{time.Second, []byte{0x0a, 2, 0x08, 1}},
		{300 * time.Second, []byte{0x0a, 3, 0x08, 0xac, 0x02}},
		{1500 * time.Millisecond, []byte{0x0a, 8, 0x08, 1, 0x10, 0x80, 0xca, 0xb5, 0xee, 0x01}},
		{time.Millisecond, []byte{0x0a, 4, 0x10, 0xc0, 0x84, 0x3d}},
	} {
		ri, ok := adapt.RPCStatus{RetryAfter: tc.d}.RetryInfo()
		if !ok || ri.TypeURL != "type.googleapis.com/google.rpc.RetryInfo" || !bytes.Equal(ri.Value, tc.want) {
			t.Errorf("RetryInfo(%v) = %q %x, %v; want %x", tc.d, ri.TypeURL, ri.Value, ok, tc.want)
		}
	}
	if _, ok := (adapt.RPCStatus{}).RetryInfo(); ok {
		t.Error("RetryInfo without a wait: ok, want none")
	}
}

// TestRPCFields: a rate limit's refusal sends Retry-After and the
// RateLimit fields, never Content-Type; a refusal with nothing to send
// gives none.
func TestRPCFields(t *testing.T) {
	k, err := adapt.New(adapt.Framework{}, inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	got := http.Header{}
	k.RPCFields(&resilience.RateLimitRejectedError{RetryAfter: 2 * time.Second, Limit: 1, Reset: time.Minute}, func(name string, v []string) { got[name] = v })
	if got.Get("Retry-After") != "2" || got.Get("Content-Type") != "" || got.Get("Ratelimit-Limit") == "" && got.Get("Ratelimit") == "" {
		t.Errorf("fields %v, want Retry-After 2 and the RateLimit fields, no Content-Type", got)
	}
	var none []string
	k.RPCFields(context.Canceled, func(name string, _ []string) { none = append(none, name) })
	if !reflect.DeepEqual(none, []string(nil)) {
		t.Errorf("fields for a client gone: %v, want none", none)
	}
}

// TestRPCStatusWithinDeadline: a wait the caller's time left cannot hold
// tells the client not to retry; a shorter one, and a status advising no
// wait, stay as they are.
func TestRPCStatusWithinDeadline(t *testing.T) {
	rate, _ := adapt.RPCStatusOf(&resilience.RateLimitRejectedError{RetryAfter: 2 * time.Second}, 0)
	for _, c := range []struct {
		left time.Duration
		stop bool
	}{{time.Second, true}, {2 * time.Second, true}, {3 * time.Second, false}} {
		if got := rate.WithinDeadline(c.left); got.NoRetry != c.stop || got.Pushback() == "-1" != c.stop {
			t.Errorf("a wait of 2s with %v left: NoRetry %v, pushback %q, want NoRetry %v", c.left, got.NoRetry, got.Pushback(), c.stop)
		}
	}
	internal, _ := adapt.RPCStatusOf(errors.New("bug"), time.Second)
	if got := internal.WithinDeadline(time.Millisecond); got != internal {
		t.Errorf("a status without advice: %+v, want it unchanged", got)
	}
}
