package resilienceconnect_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
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

// TestHTTP1UnaryAnswerWholeWhileHandlerRuns: over HTTP/1 a Connect unary
// call past its deadline is answered on the request's own goroutine, so
// the answer must be complete by itself: a Connect error with
// Content-Length and Connection: close, read to its end while the handler
// still holds the connection.
func TestHTTP1UnaryAnswerWholeWhileHandlerRuns(t *testing.T) {
	opts := inbound.Options{Timeout: 100 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}
	ts := startServer(t, opts)
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitLimit)) // an answer that is not whole fails here, not by hanging
	body := `"` + msgHold + `"`                     // StringValue in JSON
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", sayProcedure, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body) // ends at Content-Length, not at the connection's end
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusGatewayTimeout || resp.ContentLength != int64(len(got)) || !resp.Close {
		t.Errorf("status %d, Content-Length %d for %d bytes, Close %v: want 504, the body's length, Connection: close",
			resp.StatusCode, resp.ContentLength, len(got), resp.Close)
	}
	var e struct{ Code string }
	if err := json.Unmarshal(got, &e); err != nil || e.Code != "deadline_exceeded" {
		t.Errorf("body %q: want a Connect error deadline_exceeded", got)
	}
	if s := ts.mw.Stats(); s.Late != 1 {
		t.Errorf("Stats %+v with the answer read: want the handler still running, Late 1", s)
	}
	ts.svc.open()
	waitFor(t, "the late handler's permit back", func() bool { return ts.mw.Stats().InFlight == 0 })
}
