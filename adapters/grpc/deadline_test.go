package resiliencegrpc_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestDeadlineAnsweredWhileHandlerRuns: at Options.Timeout a unary call
// whose handler ignores its context is answered DEADLINE_EXCEEDED (ErrorInfo
// TIMEOUT) while the handler still runs; the handler keeps its permit,
// counted late, until it returns, and its late header, trailer and reply
// go nowhere.
func TestDeadlineAnsweredWhileHandlerRuns(t *testing.T) {
	for _, how := range []mode{viaRegistrar, viaInterceptors} {
		t.Run(how.String(), func(t *testing.T) {
			g := make(gate)
			lateErrs := make(chan error, 2)
			svc := &service{unary: func(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
				<-g // ignores ctx
				lateErrs <- grpc.SetHeader(ctx, metadata.Pairs("late", "1"))
				lateErrs <- grpc.SetTrailer(ctx, metadata.Pairs("late", "1"))
				return &testpb.SimpleResponse{}, nil
			}}
			s := start(t, inbound.Options{Timeout: 50 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, svc, how)
			defer g.open()
			r := receive(t, "timed-out call", s.callUnary(context.Background()))
			checkRejection(t, r, codes.DeadlineExceeded, inbound.CodeTimeout, "", 0, "")
			if len(r.trailer.Get("late")) != 0 {
				t.Errorf("late trailer reached the client: %v", r.trailer)
			}
			// Answered while the handler is still held: it keeps its permit.
			if st := s.mw.Stats(); st.InFlight != 1 || st.Late != 1 {
				t.Fatalf("stats %+v after the answer, want the handler in flight and late", st)
			}
			g.open()
			for range 2 {
				if err := receive(t, "late write's error", lateErrs); status.Code(err) != codes.DeadlineExceeded {
					t.Errorf("late write: %v, want DEADLINE_EXCEEDED", err)
				}
			}
			s.waitStats("the late handler's permit back", func(st inbound.Stats) bool { return st.InFlight == 0 && st.Late == 0 })
		})
	}
}

// TestClientDeadlineIsTheBudget: a call queued behind a busy permit waits
// no longer than its caller's grpc-timeout: its queue place is free once
// that passes, long before QueueTimeout, and the server answers
// DEADLINE_EXCEEDED.
func TestClientDeadlineIsTheBudget(t *testing.T) {
	g := make(gate)
	svc, entered := holdOne(g)
	s := start(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Hour}}, svc, viaRegistrar)
	defer g.open()
	held := s.callUnary(context.Background())
	receive(t, "held call in its handler", entered)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r := receive(t, "queued call", s.callUnary(ctx))
	if status.Code(r.err) != codes.DeadlineExceeded {
		t.Fatalf("queued call: %v, want DEADLINE_EXCEEDED", r.err)
	}
	s.waitStats("the queue place back", func(st inbound.Stats) bool { return st.Queued == 0 })
	g.open()
	receive(t, "held call", held)
}

// TestEffectiveDeadlineIsTheEarlier: with a caller's deadline shorter than
// Options.Timeout the handler's context ends at the caller's.
func TestEffectiveDeadlineIsTheEarlier(t *testing.T) {
	got := make(chan time.Duration, 1)
	svc := &service{unary: func(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		d, _ := ctx.Deadline()
		got <- time.Until(d)
		return &testpb.SimpleResponse{}, nil
	}}
	s := start(t, inbound.Options{Timeout: time.Hour}, svc, viaRegistrar)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	receive(t, "call", s.callUnary(ctx))
	if d := <-got; d > 10*time.Second || d <= 0 {
		t.Errorf("handler's deadline in %v, want the caller's (≤ 10 s), not the hour of Options.Timeout", d)
	}
}

// TestStreamPastDeadline: a server stream that has sent a message and then
// ignores its context ends with DEADLINE_EXCEEDED at Options.Timeout; its
// later sends fail without reaching the stream (run with -race), and its
// permit comes back when it returns.
func TestStreamPastDeadline(t *testing.T) {
	for _, how := range []mode{viaRegistrar, viaInterceptors} {
		t.Run(how.String(), func(t *testing.T) {
			g := make(gate)
			late := make(chan error, 1)
			svc := &service{output: func(_ *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
				if err := st.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
					return err
				}
				<-g
				var err error
				for range 100 { // late sends, racing the answer's status
					if err = st.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
						break
					}
				}
				st.SetTrailer(metadata.Pairs("late", "1"))
				late <- err
				return nil
			}}
			s := start(t, inbound.Options{Timeout: 100 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4}}, svc, how)
			defer g.open()
			stream, err := s.client.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != nil {
				t.Fatalf("first message: %v", err)
			}
			_, err = stream.Recv()
			if d := detailsOf(t, err); d.code != codes.DeadlineExceeded || d.info == nil || d.info.Reason != inbound.CodeTimeout {
				t.Fatalf("stream end: %v, want DEADLINE_EXCEEDED TIMEOUT", err)
			}
			if st := s.mw.Stats(); st.InFlight != 1 || st.Late != 1 {
				t.Fatalf("stats %+v after the answer, want the handler in flight and late", st)
			}
			if len(stream.Trailer().Get("late")) != 0 {
				t.Errorf("late trailer reached the client")
			}
			g.open()
			if err := receive(t, "late send's error", late); status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("late send: %v, want DEADLINE_EXCEEDED", err)
			}
			s.waitStats("the stream's permit back", func(st inbound.Stats) bool { return st.InFlight == 0 && st.Late == 0 })
		})
	}
}

// TestBidiStreamInTime: a bidi stream within its deadline echoes every
// message and holds one permit for its whole life.
func TestBidiStreamInTime(t *testing.T) {
	svc := &service{duplex: func(st testpb.TestService_FullDuplexCallServer) error {
		for {
			_, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := st.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
				return err
			}
		}
	}}
	s := start(t, inbound.Options{Timeout: time.Minute, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, svc, viaRegistrar)
	stream, err := s.client.FullDuplexCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := stream.Send(&testpb.StreamingOutputCallRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
		if st := s.mw.Stats(); st.InFlight != 1 {
			t.Fatalf("stats %+v during the stream, want one permit held", st)
		}
	}
	_ = stream.CloseSend()
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream end: %v, want EOF", err)
	}
	s.waitStats("the stream's permit back", func(st inbound.Stats) bool { return st.InFlight == 0 })
}

// TestStreamRejectedBeforeFirstMessage: with every permit held a client
// stream is refused before its handler reads anything: the handler never
// runs and no message is decoded.
func TestStreamRejectedBeforeFirstMessage(t *testing.T) {
	for _, how := range []mode{viaRegistrar, viaInterceptors} {
		t.Run(how.String(), func(t *testing.T) {
			g := make(gate)
			entered := make(chan struct{}, 4)
			svc := &service{input: func(st testpb.TestService_StreamingInputCallServer) error {
				entered <- struct{}{}
				<-g
				return st.SendAndClose(&testpb.StreamingInputCallResponse{})
			}}
			s := start(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, svc, how)
			defer g.open()
			first, err := s.client.StreamingInputCall(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			receive(t, "first stream in its handler", entered)
			second, err := s.client.StreamingInputCall(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			_ = second.Send(&testpb.StreamingInputCallRequest{})
			_, err = second.CloseAndRecv()
			if d := detailsOf(t, err); d.code != codes.Unavailable || d.info == nil || d.info.Metadata["reason"] != "full" {
				t.Fatalf("second stream: %v, want UNAVAILABLE full", err)
			}
			if n := s.codec.decoded.Load(); n != 0 {
				t.Errorf("%d messages decoded, want none", n)
			}
			if len(entered) != 0 {
				t.Errorf("the rejected stream's handler ran")
			}
			g.open()
			if _, err := first.CloseAndRecv(); err != nil {
				t.Fatalf("first stream: %v", err)
			}
		})
	}
}
