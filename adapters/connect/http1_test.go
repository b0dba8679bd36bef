package resilienceconnect_test

import (
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestHTTP1: over HTTP/1.1 (Connect and gRPC-Web need no HTTP/2), a
// server stream is ended with DeadlineExceeded after its first message, a
// call beside its late handler is refused Unavailable, and a unary call
// past its deadline is answered DeadlineExceeded.
func TestHTTP1(t *testing.T) {
	opts := inbound.Options{Timeout: 200 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}
	for _, p := range protocols {
		if p.name == "grpc" {
			continue // gRPC needs HTTP/2
		}
		t.Run(p.name, func(t *testing.T) {
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			h1 := &http.Client{Transport: tr}

			ts := startServer(t, opts)
			count := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](h1, ts.url+countProcedure, p.opts...)
			st, err := count.CallServerStream(t.Context(), connect.NewRequest(wrapperspb.String(msgHold)))
			if err != nil {
				t.Fatal(err)
			}
			if !st.Receive() || st.Msg().GetValue() != "1" {
				t.Fatalf("first message: %v", st.Err())
			}
			if st.Receive() {
				t.Fatalf("a message after the deadline: %v", st.Msg())
			}
			expectCode(t, "stream past its deadline", st.Err(), connect.CodeDeadlineExceeded, inbound.CodeTimeout, "")
			_ = st.Close()
			say := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](h1, ts.url+sayProcedure, p.opts...)
			_, err = say.CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x")))
			expectCode(t, "beside the late handler", err, connect.CodeUnavailable, inbound.CodeBulkheadFull, "full")
			ts.svc.open()
			waitFor(t, "the late handler's permit back", func() bool { return ts.mw.Stats().InFlight == 0 })

			ts = startServer(t, opts)
			say = connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](h1, ts.url+sayProcedure, p.opts...)
			_, err = say.CallUnary(t.Context(), connect.NewRequest(wrapperspb.String(msgHold)))
			expectCode(t, "unary past its deadline", err, connect.CodeDeadlineExceeded, inbound.CodeTimeout, "")
		})
	}
}
