package resiliencegrpc_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/budget"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/outbound"
	"github.com/ylcnfrht/resilience/core/property"
	"github.com/ylcnfrht/resilience/core/throttle"
)

// newClient returns a Client built from opts, failing the test on an
// error.
func newClient(t *testing.T, opts resiliencegrpc.ClientOptions) *resiliencegrpc.Client {
	t.Helper()
	c, err := resiliencegrpc.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withClient returns the dial options that install c's interceptors.
func withClient(c *resiliencegrpc.Client) []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.UnaryInterceptor()), grpc.WithChainStreamInterceptor(c.StreamInterceptor())}
}

// refusing starts a server behind a middleware built from opts (its
// Concurrency is set here: one permit, no queue) whose only permit is
// held by a call until the returned gate opens, so that every other
// call is refused UNAVAILABLE full with opts' pushback. The client
// is dialled with dial and arr records the attempts of calls marked
// with x-call.
func refusing(t *testing.T, opts inbound.Options, arr *arrivals, dial ...grpc.DialOption) (*server, gate) {
	t.Helper()
	g := make(gate)
	svc, entered := holdOne(g)
	opts.Concurrency = &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}
	s := startWith(t, opts, svc, viaRegistrar, []grpc.ServerOption{grpc.InTapHandle(arr.tap)}, dial...)
	// The held call goes through a connection of its own, without the
	// Client, so that it counts in neither budget nor throttle.
	plain, err := grpc.NewClient(s.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() {
		_, err := testpb.NewTestServiceClient(plain).UnaryCall(context.Background(), &testpb.SimpleRequest{})
		held <- err
	}()
	receive(t, "held call in its handler", entered)
	t.Cleanup(func() {
		defer plain.Close()
		g.open()
		receive(t, "held call", held)
	})
	return s, g
}

// marked is a context whose calls the tap of arrivals records.
func marked() context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-call", "1")
}

// TestClientRetryHonoursPushback: a call refused with a pushback of
// 300 ms is retried no sooner (not after the client's 1 ms backoff), the
// retry carries grpc-previous-rpc-attempts, the server sees it as a
// retry (by.IsRetry in its key function, what by.RetriesLast ranks by), and it
// succeeds.
func TestClientRetryHonoursPushback(t *testing.T) {
	var arr arrivals
	c := newClient(t, resiliencegrpc.ClientOptions{Delay: time.Millisecond})
	g := make(gate)
	var mu sync.Mutex
	var sawRetry []bool
	var sawMark []string
	svc, entered := holdOne(g)
	// The rate limit's key function reads the request view, as a priority
	// function does: what it sees is what by.RetriesLast ranks by.
	key := func(ctx context.Context) string {
		if call, ok := resiliencegrpc.CallFrom(ctx); ok && len(call.Metadata.Get("x-call")) > 0 {
			mu.Lock()
			sawRetry = append(sawRetry, by.IsRetry(ctx))
			sawMark = append(sawMark, call.Metadata.Get(resiliencegrpc.AttemptsMetadata)...)
			mu.Unlock()
		}
		return "k"
	}
	opts := inbound.Options{RetryAfter: 300 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1000, Window: time.Minute, Key: key}}
	s := startWith(t, opts, svc, viaRegistrar, []grpc.ServerOption{grpc.InTapHandle(arr.tap)}, withClient(c)...)
	held := s.callUnary(context.Background())
	receive(t, "held call in its handler", entered)
	retried := s.callUnary(marked())
	s.waitStats("the first attempt refused", func(st inbound.Stats) bool { return st.RequestCounts.Full >= 1 })
	g.open()
	receive(t, "held call", held)
	if r := receive(t, "retried call", retried); r.err != nil {
		t.Fatalf("retried call: %v, want success on a later attempt", r.err)
	}
	at := arr.times()
	if len(at) != 2 {
		t.Fatalf("%d attempts, want 2", len(at))
	}
	if gap := at[1].Sub(at[0]); gap < 290*time.Millisecond {
		t.Errorf("second attempt %v after the first, want at least the 300 ms pushback", gap)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sawRetry) != 2 || sawRetry[0] || !sawRetry[1] {
		t.Errorf("server saw IsRetry %v, want [false true]", sawRetry)
	}
	if len(sawMark) != 1 || sawMark[0] != "1" {
		t.Errorf("server saw %s %q, want [1]", resiliencegrpc.AttemptsMetadata, sawMark)
	}
}

// TestClientFirstAttemptUnmarked: a call answered at once carries no
// retry mark.
func TestClientFirstAttemptUnmarked(t *testing.T) {
	var mark atomic.Value
	svc := &service{unary: func(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mark.Store(md.Get(resiliencegrpc.AttemptsMetadata))
		return &testpb.SimpleResponse{}, nil
	}}
	s := start(t, inbound.Options{}, svc, viaRegistrar, withClient(newClient(t, resiliencegrpc.ClientOptions{}))...)
	if r := receive(t, "call", s.callUnary(context.Background())); r.err != nil {
		t.Fatal(r.err)
	}
	if m := mark.Load().([]string); len(m) != 0 {
		t.Errorf("first attempt carried %q", m)
	}
}

// TestClientRetriesWithinBudget: with a budget of one retry per first
// attempt (no floor), each call refused every time is retried once and
// then ends UNAVAILABLE, although MaxRetries would allow three: the
// budget, not the count, stops it.
func TestClientRetriesWithinBudget(t *testing.T) {
	b, err := budget.New(budget.Options{Ratio: 1, MinPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	var arr arrivals
	c := newClient(t, resiliencegrpc.ClientOptions{Delay: time.Millisecond, Budget: b})
	s, _ := refusing(t, inbound.Options{RetryAfter: time.Millisecond}, &arr, withClient(c)...)
	const calls = 3
	for i := range calls {
		r := receive(t, "call", s.callUnary(marked()))
		if status.Code(r.err) != codes.Unavailable {
			t.Fatalf("call %d: %v, want UNAVAILABLE", i, r.err)
		}
	}
	if n := len(arr.times()); n != 2*calls {
		t.Errorf("%d attempts for %d calls, want %d: one retry each", n, calls, 2*calls)
	}
	if st := b.Stats(); st.Allowed != calls || st.Denied != calls {
		t.Errorf("budget allowed %d and denied %d retries, want %d and %d", st.Allowed, st.Denied, calls, calls)
	}
}

// TestClientMaxRetries: without a budget, a call refused every time makes
// 1 + MaxRetries attempts.
func TestClientMaxRetries(t *testing.T) {
	var arr arrivals
	c := newClient(t, resiliencegrpc.ClientOptions{Delay: time.Millisecond, MaxRetries: 2})
	s, _ := refusing(t, inbound.Options{RetryAfter: time.Millisecond}, &arr, withClient(c)...)
	r := receive(t, "call", s.callUnary(marked()))
	if status.Code(r.err) != codes.Unavailable {
		t.Fatalf("call: %v, want UNAVAILABLE", r.err)
	}
	if n := len(arr.times()); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
}

// TestClientStopPushbackEndsRetries: a draining server's pushback of -1
// ("do not retry") ends the call after one attempt.
func TestClientStopPushbackEndsRetries(t *testing.T) {
	var arr arrivals
	c := newClient(t, resiliencegrpc.ClientOptions{Delay: time.Millisecond})
	s := startWith(t, inbound.Options{}, &service{}, viaRegistrar, []grpc.ServerOption{grpc.InTapHandle(arr.tap)}, withClient(c)...)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.mw.Inbound().Drain(ended)
	r := receive(t, "call", s.callUnary(marked()))
	if status.Code(r.err) != codes.Unavailable {
		t.Fatalf("call: %v, want UNAVAILABLE", r.err)
	}
	if n := len(arr.times()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// TestClientLongPushbackNotWaited: a pushback longer than MaxRetryWait is
// not waited for: one attempt, its answer returned.
func TestClientLongPushbackNotWaited(t *testing.T) {
	var arr arrivals
	c := newClient(t, resiliencegrpc.ClientOptions{Delay: time.Millisecond, MaxRetryWait: 100 * time.Millisecond})
	s, _ := refusing(t, inbound.Options{RetryAfter: time.Minute}, &arr, withClient(c)...)
	if r := receive(t, "call", s.callUnary(marked())); status.Code(r.err) != codes.Unavailable {
		t.Fatalf("call: %v, want UNAVAILABLE", r.err)
	}
	if n := len(arr.times()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// TestClientDeadlineSkipsRetry: a pushback (2 s) that would outlast the
// call's deadline (500 ms) is not waited for: the call returns the
// server's UNAVAILABLE at once, not a DEADLINE_EXCEEDED at its deadline,
// after one attempt.
func TestClientDeadlineSkipsRetry(t *testing.T) {
	var arr arrivals
	c := newClient(t, resiliencegrpc.ClientOptions{Delay: time.Millisecond})
	s, _ := refusing(t, inbound.Options{RetryAfter: 2 * time.Second}, &arr, withClient(c)...)
	ctx, cancel := context.WithTimeout(marked(), 500*time.Millisecond)
	defer cancel()
	if r := receive(t, "call", s.callUnary(ctx)); status.Code(r.err) != codes.Unavailable {
		t.Fatalf("call: %v, want the server's UNAVAILABLE", r.err)
	}
	if n := len(arr.times()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// TestClientSingleAttempt: a context marked property.WithSingleAttempt
// is not retried.
func TestClientSingleAttempt(t *testing.T) {
	var arr arrivals
	c := newClient(t, resiliencegrpc.ClientOptions{Delay: time.Millisecond})
	s, _ := refusing(t, inbound.Options{RetryAfter: time.Millisecond}, &arr, withClient(c)...)
	if r := receive(t, "call", s.callUnary(property.WithSingleAttempt(marked()))); status.Code(r.err) != codes.Unavailable {
		t.Fatalf("call: %v, want UNAVAILABLE", r.err)
	}
	if n := len(arr.times()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// TestClientRetriesRateLimitAfterItsWait: a RESOURCE_EXHAUSTED from the
// server's rate limiter carries its wait as pushback; the call is retried
// after it and succeeds.
func TestClientRetriesRateLimitAfterItsWait(t *testing.T) {
	var arr arrivals
	c := newClient(t, resiliencegrpc.ClientOptions{Delay: time.Millisecond})
	opts := inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: 300 * time.Millisecond}}
	s := startWith(t, opts, &service{}, viaRegistrar, []grpc.ServerOption{grpc.InTapHandle(arr.tap)}, withClient(c)...)
	if r := receive(t, "first call", s.callUnary(context.Background())); r.err != nil {
		t.Fatal(r.err)
	}
	if r := receive(t, "rate-limited call", s.callUnary(marked())); r.err != nil {
		t.Fatalf("rate-limited call: %v, want success after the limiter's wait", r.err)
	}
	if n := len(arr.times()); n < 2 {
		t.Errorf("%d attempts, want a retry", n)
	}
}

// TestClientRetryableAnswers: which handler answers are retried. A
// trailers-only UNAVAILABLE is (as gRPC's own retries do); an UNAVAILABLE
// after response headers (the handler ran and said so) is not; a
// RESOURCE_EXHAUSTED without pushback (grpc-go's own answer to an
// oversized message looks the same) is not; INTERNAL is not unless
// RetryableCodes says so.
func TestClientRetryableAnswers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		codes     []codes.Code
		answer    func(ctx context.Context) error
		wantCalls int32
	}{
		{"trailers-only unavailable", nil, func(context.Context) error { return status.Error(codes.Unavailable, "x") }, 3},
		{"unavailable after headers", nil, func(ctx context.Context) error {
			_ = grpc.SendHeader(ctx, metadata.Pairs("k", "v"))
			return status.Error(codes.Unavailable, "x")
		}, 1},
		{"unavailable after empty headers", nil, func(ctx context.Context) error {
			_ = grpc.SendHeader(ctx, metadata.MD{})
			return status.Error(codes.Unavailable, "x")
		}, 1},
		{"resource exhausted without pushback", nil, func(context.Context) error { return status.Error(codes.ResourceExhausted, "x") }, 1},
		{"internal", nil, func(context.Context) error { return status.Error(codes.Internal, "x") }, 1},
		{"internal configured", []codes.Code{codes.Internal}, func(context.Context) error { return status.Error(codes.Internal, "x") }, 3},
		{"unavailable not configured", []codes.Code{codes.Internal}, func(context.Context) error { return status.Error(codes.Unavailable, "x") }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			svc := &service{unary: func(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
				calls.Add(1)
				return nil, tc.answer(ctx)
			}}
			c := newClient(t, resiliencegrpc.ClientOptions{Delay: time.Millisecond, MaxRetries: 2, RetryableCodes: tc.codes})
			s := start(t, inbound.Options{}, svc, viaRegistrar, withClient(c)...)
			if r := receive(t, "call", s.callUnary(context.Background())); r.err == nil {
				t.Fatal("call succeeded")
			}
			if n := calls.Load(); n != tc.wantCalls {
				t.Errorf("%d attempts, want %d", n, tc.wantCalls)
			}
		})
	}
}

// TestClientThrottleRefusesLocally: while the server refuses every call,
// the throttle soon refuses most of them itself: a *ThrottledError,
// UNAVAILABLE to status.Code, that never reached the server.
func TestClientThrottleRefusesLocally(t *testing.T) {
	th, err := throttle.New(throttle.Options[struct{}]{MinPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	var arr arrivals
	c := newClient(t, resiliencegrpc.ClientOptions{MaxRetries: -1, Throttle: th})
	s, _ := refusing(t, inbound.Options{RetryAfter: time.Millisecond}, &arr, withClient(c)...)
	const calls = 60
	throttled := 0
	for i := range calls {
		r := receive(t, "call", s.callUnary(marked()))
		if status.Code(r.err) != codes.Unavailable {
			t.Fatalf("call %d: %v, want UNAVAILABLE", i, r.err)
		}
		if errors.Is(r.err, throttle.ErrThrottled) {
			var te *resiliencegrpc.ThrottledError
			if !errors.As(r.err, &te) || !errors.Is(r.err, resilience.ErrRejected) {
				t.Fatalf("throttled call: %v does not match *ThrottledError and ErrRejected", r.err)
			}
			throttled++
		}
	}
	sent := len(arr.times())
	t.Logf("%d calls against a server refusing all: %d sent, %d throttled locally", calls, sent, throttled)
	if throttled < calls/2 || sent+throttled != calls {
		t.Errorf("%d of %d calls throttled locally, %d sent; want most throttled and the rest sent", throttled, calls, sent)
	}
	if st := th.Stats(); st.Throttled != uint64(throttled) {
		t.Errorf("throttle counted %d local refusals, want %d", st.Throttled, throttled)
	}
}

// TestClientThrottleLetsAnswersThrough: calls the server answers, with
// errors that are answers (NOT_FOUND), are never throttled.
func TestClientThrottleLetsAnswersThrough(t *testing.T) {
	th, err := throttle.New(throttle.Options[struct{}]{MinPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	svc := &service{unary: func(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		return nil, status.Error(codes.NotFound, "no such thing")
	}}
	s := start(t, inbound.Options{}, svc, viaRegistrar, withClient(newClient(t, resiliencegrpc.ClientOptions{Throttle: th}))...)
	for i := range 30 {
		if r := receive(t, "call", s.callUnary(context.Background())); status.Code(r.err) != codes.NotFound {
			t.Fatalf("call %d: %v, want NOT_FOUND", i, r.err)
		}
	}
	if st := th.Stats(); st.Throttled != 0 || st.Accepts != 30 {
		t.Errorf("throttle stats %+v, want 30 accepts and none throttled", st)
	}
}

// failFirst is a stream interceptor, inside the Client's, that fails
// the first n streams' establishment with UNAVAILABLE, as grpc-go does
// without a ready connection.
func failFirst(n int32) grpc.StreamClientInterceptor {
	var seen atomic.Int32
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if seen.Add(1) <= n {
			return nil, status.Error(codes.Unavailable, "no ready connection")
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
}

// TestClientStreamRetriesEstablishment: a stream whose establishment
// fails is retried; the stream that opens carries the retry mark, and
// its messages flow both ways.
func TestClientStreamRetriesEstablishment(t *testing.T) {
	var mark atomic.Value
	svc := &service{duplex: func(st testpb.TestService_FullDuplexCallServer) error {
		md, _ := metadata.FromIncomingContext(st.Context())
		mark.Store(md.Get(resiliencegrpc.AttemptsMetadata))
		for {
			if _, err := st.Recv(); err != nil {
				return nil
			}
			if err := st.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
				return err
			}
		}
	}}
	c := newClient(t, resiliencegrpc.ClientOptions{Delay: time.Millisecond})
	s := start(t, inbound.Options{}, svc, viaRegistrar, grpc.WithChainStreamInterceptor(c.StreamInterceptor(), failFirst(2)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := s.client.FullDuplexCall(ctx)
	if err != nil {
		t.Fatalf("stream: %v, want it opened on the third attempt", err)
	}
	for range 3 {
		if err := st.Send(&testpb.StreamingOutputCallRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("end of stream: %v, want io.EOF", err)
	}
	if m, _ := mark.Load().([]string); len(m) != 1 || m[0] != "2" {
		t.Errorf("stream carried %s %q, want [2]", resiliencegrpc.AttemptsMetadata, m)
	}
}

// TestClientStreamThrottle: streams the server refuses (their first
// read gets UNAVAILABLE) count as refused, so the throttle soon refuses
// new streams locally: a bidi stream at NewStream, a server stream
// (opened at its first read) at its first Recv.
func TestClientStreamThrottle(t *testing.T) {
	for _, bidi := range []bool{false, true} {
		name := "server-stream"
		if bidi {
			name = "bidi"
		}
		t.Run(name, func(t *testing.T) {
			th, err := throttle.New(throttle.Options[struct{}]{MinPerSecond: -1})
			if err != nil {
				t.Fatal(err)
			}
			var arr arrivals
			c := newClient(t, resiliencegrpc.ClientOptions{MaxRetries: -1, Throttle: th})
			s, _ := refusing(t, inbound.Options{RetryAfter: time.Millisecond}, &arr, withClient(c)...)
			const streams = 40
			throttled := 0
			for i := range streams {
				var err error
				if bidi {
					var st testpb.TestService_FullDuplexCallClient
					if st, err = s.client.FullDuplexCall(marked()); err == nil {
						_, err = st.Recv()
					}
				} else {
					var st testpb.TestService_StreamingOutputCallClient
					if st, err = s.client.StreamingOutputCall(marked(), &testpb.StreamingOutputCallRequest{}); err == nil {
						_, err = st.Recv()
					}
				}
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("stream %d: %v, want UNAVAILABLE", i, err)
				}
				if errors.Is(err, throttle.ErrThrottled) {
					throttled++
				}
			}
			if sent := len(arr.times()); throttled < streams/2 || sent+throttled != streams {
				t.Errorf("%d of %d streams throttled locally, %d sent; want most throttled and the rest sent", throttled, streams, sent)
			}
			if st := th.Stats(); st.Throttled != uint64(throttled) || st.Accepts != 0 {
				t.Errorf("throttle stats %+v: want %d throttled and no accepts", st, throttled)
			}
		})
	}
}

// TestClientServerStreamRetried: a server stream refused before its
// first response is opened again after the pushback, its request sent
// again, marked as a retry; the caller reads every message of the
// stream that got through, whether it reads Header first or not.
func TestClientServerStreamRetried(t *testing.T) {
	for _, headerFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("header first %v", headerFirst), func(t *testing.T) {
			var arr arrivals
			g := make(gate)
			held, entered := make(chan error, 1), make(chan struct{}, 1)
			var marks atomic.Value
			svc := &service{output: func(req *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
				md, _ := metadata.FromIncomingContext(st.Context())
				if len(md.Get("x-call")) == 0 { // the call holding the permit
					entered <- struct{}{}
					<-g
					return nil
				}
				marks.Store(md.Get(resiliencegrpc.AttemptsMetadata))
				for _, p := range req.GetResponseParameters() {
					if err := st.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
						return err
					}
				}
				return nil
			}}
			c := newClient(t, resiliencegrpc.ClientOptions{Delay: time.Millisecond})
			opts := inbound.Options{RetryAfter: 200 * time.Millisecond, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}
			s := startWith(t, opts, svc, viaRegistrar, []grpc.ServerOption{grpc.InTapHandle(arr.tap)}, withClient(c)...)
			go func() {
				st, err := s.client.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
				if err == nil {
					_, err = st.Recv()
				}
				held <- err
			}()
			receive(t, "held stream in its handler", entered)
			req := &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 1}, {Size: 2}, {Size: 3}}}
			st, err := s.client.StreamingOutputCall(marked(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan []int, 1)
			go func() {
				var sizes []int
				defer func() { got <- sizes }()
				if headerFirst {
					if _, err := st.Header(); err != nil {
						t.Errorf("Header: %v", err)
					}
				}
				for {
					m, err := st.Recv()
					if err == io.EOF {
						return
					}
					if err != nil {
						t.Errorf("Recv: %v", err)
						return
					}
					sizes = append(sizes, len(m.GetPayload().GetBody()))
				}
			}()
			s.waitStats("the first attempt refused", func(st inbound.Stats) bool { return st.RequestCounts.Full >= 1 })
			g.open()
			if err := receive(t, "held stream", held); err != io.EOF {
				t.Fatalf("held stream: %v", err)
			}
			if sizes := receive(t, "the retried stream's messages", got); fmt.Sprint(sizes) != "[1 2 3]" {
				t.Errorf("read messages of sizes %v, want [1 2 3]", sizes)
			}
			if at := arr.times(); len(at) != 2 || at[1].Sub(at[0]) < 190*time.Millisecond {
				t.Errorf("attempts at %v, want 2, the second after the 200 ms pushback", at)
			}
			if m, _ := marks.Load().([]string); len(m) != 1 || m[0] != "1" {
				t.Errorf("the stream that got through carried %s %q, want [1]", resiliencegrpc.AttemptsMetadata, m)
			}
		})
	}
}

// TestClientServerStreamStopPushback: a server stream refused with a
// "do not retry" pushback (a draining server) is not opened again, and
// its first read returns the refusal.
func TestClientServerStreamStopPushback(t *testing.T) {
	var arr arrivals
	c := newClient(t, resiliencegrpc.ClientOptions{Delay: time.Millisecond})
	s := startWith(t, inbound.Options{}, &service{}, viaRegistrar, []grpc.ServerOption{grpc.InTapHandle(arr.tap)}, withClient(c)...)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.mw.Inbound().Drain(ended)
	st, err := s.client.StreamingOutputCall(marked(), &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv: %v, want UNAVAILABLE", err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("second Recv: %v, want the same UNAVAILABLE", err)
	}
	if n := len(arr.times()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// TestClientStreamCancelledRecorded: a stream the caller abandons before
// anything decided it is recorded once, as an answer, when its context
// ends (goleak checks nothing stays behind).
func TestClientStreamCancelledRecorded(t *testing.T) {
	th, err := throttle.New(throttle.Options[struct{}]{MinPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	svc := &service{duplex: func(st testpb.TestService_FullDuplexCallServer) error {
		select {
		case <-st.Context().Done():
		case <-release:
		}
		return nil
	}}
	defer close(release)
	s := start(t, inbound.Options{}, svc, viaRegistrar, withClient(newClient(t, resiliencegrpc.ClientOptions{Throttle: th}))...)
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := s.client.FullDuplexCall(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for th.Stats().Accepts != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("throttle stats %+v, want the abandoned stream recorded as an answer", th.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNewClientRefusesBadOptions: each invalid option is a
// *resilience.ConfigError naming its field.
func TestNewClientRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		field string
		opts  resiliencegrpc.ClientOptions
	}{
		{"ClientOptions.Delay", resiliencegrpc.ClientOptions{Delay: -time.Second}},
		{"ClientOptions.MaxRetryWait", resiliencegrpc.ClientOptions{MaxRetryWait: -time.Second}},
		{"ClientOptions.RetryableCodes", resiliencegrpc.ClientOptions{RetryableCodes: []codes.Code{codes.OK}}},
		{"ClientOptions.RetryableCodes", resiliencegrpc.ClientOptions{RetryableCodes: []codes.Code{99}}},
	} {
		_, err := resiliencegrpc.NewClient(tc.opts)
		var ce *resilience.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("NewClient(%+v): %v, want a ConfigError naming %s", tc.opts, err, tc.field)
		}
	}
}

// TestClientCancelDuringWait: a call cancelled while it waits out a
// pushback ends at once with CANCELLED, a gRPC status like grpc-go's own.
func TestClientCancelDuringWait(t *testing.T) {
	var arr arrivals
	waiting := make(chan struct{}, 1)
	c := newClient(t, resiliencegrpc.ClientOptions{Listener: event.ListenerFunc(func(_ context.Context, e event.Event) {
		if e.Name == event.Retry { // emitted just before the wait
			waiting <- struct{}{}
		}
	})})
	s, _ := refusing(t, inbound.Options{RetryAfter: 20 * time.Second}, &arr, withClient(c)...)
	ctx, cancel := context.WithCancel(marked())
	defer cancel()
	call := s.callUnary(ctx)
	receive(t, "the wait for a retry", waiting)
	cancel()
	if r := receive(t, "call", call); status.Code(r.err) != codes.Canceled {
		t.Fatalf("call: %v, want CANCELLED", r.err)
	}
	if n := len(arr.times()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// TestClientServerStreamReadBeforeCloseSend: a server stream read while
// its request is being sent (not what generated code does: the read may
// come first, and then opens the stream with one attempt) gets its
// answer, the request sent meanwhile reaching the stream once.
func TestClientServerStreamReadBeforeCloseSend(t *testing.T) {
	svc := &service{output: func(req *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
		for _, p := range req.GetResponseParameters() {
			if err := st.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
				return err
			}
		}
		return nil
	}}
	s := start(t, inbound.Options{}, svc, viaRegistrar, withClient(newClient(t, resiliencegrpc.ClientOptions{}))...)
	desc := &grpc.StreamDesc{StreamName: "StreamingOutputCall", ServerStreams: true}
	st, err := s.conn.NewStream(context.Background(), desc, "/grpc.testing.TestService/StreamingOutputCall")
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	var m testpb.StreamingOutputCallResponse
	go func() { read <- st.RecvMsg(&m) }()
	req := &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 4}}}
	if err := st.SendMsg(req); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, "first read", read); err != nil || len(m.GetPayload().GetBody()) != 4 {
		t.Fatalf("first read: %v, %d bytes; want the 4-byte message", err, len(m.GetPayload().GetBody()))
	}
	if err := st.RecvMsg(&m); err != io.EOF {
		t.Fatalf("second read: %v, want io.EOF", err)
	}
}

// TestClientSharesThrottleWithHTTP: one throttle made for net/http
// clients (throttle.New(outbound.ThrottleOptions())) serves both an
// outbound.Transport and a Client, so what the gRPC calls meet counts for
// both.
func TestClientSharesThrottleWithHTTP(t *testing.T) {
	th, err := throttle.New(outbound.ThrottleOptions())
	if err != nil {
		t.Fatal(err)
	}
	b, err := budget.New(budget.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbound.New(outbound.Options{Budget: b, Throttle: th}); err != nil {
		t.Fatal(err)
	}
	var arr arrivals
	c := newClient(t, resiliencegrpc.ClientOptions{MaxRetries: -1, Budget: b, Throttle: th})
	s, _ := refusing(t, inbound.Options{RetryAfter: time.Millisecond}, &arr, withClient(c)...)
	if r := receive(t, "call", s.callUnary(marked())); status.Code(r.err) != codes.Unavailable {
		t.Fatalf("call: %v, want UNAVAILABLE", r.err)
	}
	if st := th.Stats(); st.Requests != 1 || st.Accepts != 0 {
		t.Errorf("shared throttle %+v, want the refused gRPC call counted", st)
	}
	if st := b.Stats(); st.FirstAttempts != 1 {
		t.Errorf("shared budget %+v, want the gRPC call's first attempt", st)
	}
}
