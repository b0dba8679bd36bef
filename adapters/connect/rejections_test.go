package resilienceconnect_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// expectCapacityAdvice checks the retry advice of a capacity rejection:
// Retry-After 1, grpc-retry-pushback-ms 1000 and a RetryInfo of 1 s.
func expectCapacityAdvice(t *testing.T, what string, ce *connect.Error) {
	t.Helper()
	if got := ce.Meta().Get("Retry-After"); got != "1" {
		t.Errorf("%s: Retry-After %q, want 1", what, got)
	}
	if got := ce.Meta().Get("Grpc-Retry-Pushback-Ms"); got != "1000" {
		t.Errorf("%s: grpc-retry-pushback-ms %q, want 1000", what, got)
	}
	if d, ok := retryDelayOf(ce); !ok || d != time.Second {
		t.Errorf("%s: RetryInfo delay %v (%v), want 1s", what, d, ok)
	}
}

// TestQueueRejectionsInEveryProtocol: a call that waited QueueTimeout, and
// one evicted from the queue by the overflow policy, are refused
// Unavailable with their reason (queue-timeout, dropped) and the retry
// advice, in every protocol; neither runs.
func TestQueueRejectionsInEveryProtocol(t *testing.T) {
	for _, p := range protocols {
		t.Run("queue-timeout/"+p.name, func(t *testing.T) {
			ts := startServer(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{
				PermitLimit: 1, QueueLimit: 1, QueueTimeout: 50 * time.Millisecond}})
			held := ts.callSay(t.Context(), p, msgHold)
			ts.svc.waitEntered(t, sayProcedure)
			_, err := ts.say(p).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x")))
			ce := expectCode(t, "waited QueueTimeout", err, connect.CodeUnavailable, inbound.CodeBulkheadFull, string(resilience.ReasonQueueTimeout))
			expectCapacityAdvice(t, "waited QueueTimeout", ce)
			ts.svc.notEntered(t)
			ts.svc.open()
			if err := await(t, "held call", held); err != nil {
				t.Errorf("held call: %v", err)
			}
		})
		t.Run("dropped/"+p.name, func(t *testing.T) {
			ts := startServer(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{
				PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Minute, Overflow: resilience.OverflowDropOldest}})
			held := ts.callSay(t.Context(), p, msgHold)
			ts.svc.waitEntered(t, sayProcedure)
			oldest := ts.callSay(t.Context(), p, "oldest")
			waitFor(t, "the first call queued", func() bool { return ts.mw.Stats().Queued == 1 })
			newest := ts.callSay(t.Context(), p, "newest")
			ce := expectCode(t, "evicted", await(t, "evicted call", oldest), connect.CodeUnavailable, inbound.CodeBulkheadFull, string(resilience.ReasonDropped))
			expectCapacityAdvice(t, "evicted", ce)
			ts.svc.notEntered(t)
			ts.svc.open()
			for what, ch := range map[string]<-chan error{"held call": held, "newest call": newest} {
				if err := await(t, what, ch); err != nil {
					t.Errorf("%s: %v", what, err)
				}
			}
		})
	}
}

// strategyFunc is a custom pipeline strategy that fails every call with
// err, before the handler.
type strategyFunc struct{ err error }

func (s strategyFunc) Execute(context.Context, resilience.Telemetry, resilience.Next) error {
	return s.err
}

// TestCustomPipelineRejections: under a custom pipeline, a strategy's
// rejection (errors.Is ErrRejected) is Unavailable REJECTED with the
// retry advice, and any other error Internal INTERNAL with a constant
// message that never carries the error's text, in every protocol.
func TestCustomPipelineRejections(t *testing.T) {
	cases := []struct {
		name       string
		err        error
		code       connect.Code
		infoReason string
	}{
		{"rejected", fmt.Errorf("tenant paused: %w", resilience.ErrRejected), connect.CodeUnavailable, inbound.CodeRejected},
		{"error", errors.New("db password wrong"), connect.CodeInternal, inbound.CodeInternal},
	}
	for _, tc := range cases {
		for _, p := range protocols {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				pl, err := resilience.NewBuilder[struct{}]().AddStrategy(strategyFunc{tc.err}).Build()
				if err != nil {
					t.Fatal(err)
				}
				ts := startServer(t, inbound.Options{Pipeline: pl})
				_, err = ts.say(p).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x")))
				ce := expectCode(t, tc.name, err, tc.code, tc.infoReason, "")
				if tc.code == connect.CodeUnavailable {
					expectCapacityAdvice(t, tc.name, ce)
				} else if ce.Meta().Get("Retry-After") != "" {
					t.Errorf("%s: Retry-After %q on an internal error", tc.name, ce.Meta().Get("Retry-After"))
				}
				if strings.Contains(ce.Message(), "tenant paused") || strings.Contains(ce.Message(), "db password") {
					t.Errorf("%s: message %q carries the error's text", tc.name, ce.Message())
				}
				ts.svc.notEntered(t)
			})
		}
	}
}
