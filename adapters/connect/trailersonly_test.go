package resilienceconnect_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// grpcPost sends a gRPC unary call of procedure with msg as its
// google.protobuf.StringValue and the extra header fields, over net/http's
// own HTTP/2 client, and returns the response, its body read whole.
func (ts *testServer) grpcPost(t *testing.T, procedure, msg string, extra ...string) (*http.Response, []byte) {
	t.Helper()
	payload, err := proto.Marshal(wrapperspb.String(msg))
	if err != nil {
		t.Fatal(err)
	}
	env := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(payload)))
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.url+procedure, bytes.NewReader(append(env, payload...)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body) // the trailers arrive with the body's end
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestGRPCRejectionsTrailersOnly: over gRPC on HTTP/2, a rejection made
// before the handler runs has its status, details and retry advice in the
// response headers, with no body and no trailers (a trailers-only
// response, the only failure gRPC clients' retry policies retry); a
// handler still running at its deadline, nothing sent yet, is answered
// trailers-only too, without a pushback. interop/grpc reads the frames
// themselves and runs grpc-go's client against them.
func TestGRPCRejectionsTrailersOnly(t *testing.T) {
	t.Run("rejections", func(t *testing.T) {
		ts := startServer(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
		held := ts.callSay(t.Context(), protocols[0], msgHold)
		ts.svc.waitEntered(t, sayProcedure)
		for _, tc := range []struct {
			name, timeout, status, pushback string
		}{
			{"full", "", "14", "1000"},
			{"deadline-expired", "0m", "4", "-1"},
		} {
			var extra []string
			if tc.timeout != "" {
				extra = []string{"Grpc-Timeout", tc.timeout}
			}
			resp, body := ts.grpcPost(t, sayProcedure, "x", extra...)
			if resp.ProtoMajor != 2 || len(body) != 0 || len(resp.Trailer) != 0 {
				t.Errorf("%s: HTTP/%d, body %q, trailers %v: want HTTP/2 with neither body nor trailers", tc.name, resp.ProtoMajor, body, resp.Trailer)
			}
			h := resp.Header
			if h.Get("Grpc-Status") != tc.status || h.Get("Grpc-Retry-Pushback-Ms") != tc.pushback || h.Get("Grpc-Status-Details-Bin") == "" || h.Get("Trailer") != "" {
				t.Errorf("%s: headers %v, want grpc-status %s, pushback %s and details, no trailer declared", tc.name, h, tc.status, tc.pushback)
			}
		}
		ts.svc.notEntered(t)
		ts.svc.open()
		if err := await(t, "held call", held); err != nil {
			t.Errorf("held call: %v", err)
		}
	})
	t.Run("deadline-of-running-call", func(t *testing.T) {
		ts := startServer(t, inbound.Options{Timeout: 50 * time.Millisecond})
		resp, body := ts.grpcPost(t, sayProcedure, msgHold)
		h := resp.Header
		if len(body) != 0 || len(resp.Trailer) != 0 || h.Get("Grpc-Status") != "4" || h.Get("Grpc-Status-Details-Bin") == "" || h.Get("Trailer") != "" {
			t.Errorf("headers %v, body %q, trailers %v: want trailers-only, grpc-status 4 with details in the headers", h, body, resp.Trailer)
		}
		if v := h.Values("Grpc-Retry-Pushback-Ms"); len(v) != 0 {
			t.Errorf("pushback %q on the deadline of an admitted call", v)
		}
	})
}
