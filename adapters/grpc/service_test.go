package resiliencegrpc_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// service is the test service: each RPC runs the function the test set,
// or answers at once.
type service struct {
	testpb.UnimplementedTestServiceServer
	unary  func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error)
	output func(req *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error
	input  func(s testpb.TestService_StreamingInputCallServer) error
	duplex func(s testpb.TestService_FullDuplexCallServer) error
}

func (s *service) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if s.unary != nil {
		return s.unary(ctx, req)
	}
	return &testpb.SimpleResponse{}, nil
}

func (s *service) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
	if s.output != nil {
		return s.output(req, st)
	}
	return nil
}

func (s *service) StreamingInputCall(st testpb.TestService_StreamingInputCallServer) error {
	if s.input != nil {
		return s.input(st)
	}
	return st.SendAndClose(&testpb.StreamingInputCallResponse{})
}

func (s *service) FullDuplexCall(st testpb.TestService_FullDuplexCallServer) error {
	if s.duplex != nil {
		return s.duplex(st)
	}
	return nil
}

// countingCodec is a proto codec counting the messages the server
// decodes.
type countingCodec struct {
	decoded atomic.Int64
}

func (c *countingCodec) Marshal(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }

func (c *countingCodec) Unmarshal(data []byte, v any) error {
	c.decoded.Add(1)
	return proto.Unmarshal(data, v.(proto.Message))
}

func (c *countingCodec) Name() string { return "proto" }

// server is a running test server and a client connected to it.
type server struct {
	t      *testing.T
	mw     *resiliencegrpc.Middleware
	srv    *grpc.Server
	client testpb.TestServiceClient
	conn   *grpc.ClientConn
	codec  *countingCodec
}

// how the middleware is installed
type mode int

const (
	viaRegistrar mode = iota
	viaInterceptors
)

func (m mode) String() string {
	if m == viaInterceptors {
		return "interceptors"
	}
	return "registrar"
}

// start serves svc behind a middleware built from opts on a loopback
// listener; clientOpts are added to the client's dial options.
func start(t *testing.T, opts inbound.Options, svc *service, how mode, clientOpts ...grpc.DialOption) *server {
	t.Helper()
	return startWith(t, opts, svc, how, nil, clientOpts...)
}

// startWith is start with extra server options.
func startWith(t *testing.T, opts inbound.Options, svc *service, how mode, extra []grpc.ServerOption, clientOpts ...grpc.DialOption) *server {
	t.Helper()
	mw, err := resiliencegrpc.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	codec := &countingCodec{}
	serverOpts := append([]grpc.ServerOption{grpc.ForceServerCodec(codec)}, extra...)
	if how == viaInterceptors {
		serverOpts = append(serverOpts, grpc.ChainUnaryInterceptor(mw.UnaryInterceptor()), grpc.ChainStreamInterceptor(mw.StreamInterceptor()))
	}
	srv := grpc.NewServer(serverOpts...)
	if how == viaInterceptors {
		testpb.RegisterTestServiceServer(srv, svc)
	} else {
		testpb.RegisterTestServiceServer(mw.Registrar(srv), svc)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, clientOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, mw: mw, srv: srv, client: testpb.NewTestServiceClient(conn), conn: conn, codec: codec}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		s.waitStats("every handler returned", func(st inbound.Stats) bool { return st.InFlight == 0 && st.Queued == 0 && st.Late == 0 })
	})
	return s
}

// waitStats polls the middleware's Stats until cond holds, failing the
// test after a generous bound.
func (s *server) waitStats(what string, cond func(inbound.Stats) bool) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond(s.mw.Stats()) {
		if time.Now().After(deadline) {
			s.t.Fatalf("waiting for %s: stats %+v", what, s.mw.Stats())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// gate holds handlers until opened.
type gate chan struct{}

func (g gate) open() {
	select {
	case <-g:
	default:
		close(g)
	}
}

// unaryResult is a finished unary call.
type unaryResult struct {
	err     error
	trailer metadata.MD
}

// callUnary starts a unary call and returns its result on a channel.
func (s *server) callUnary(ctx context.Context, opts ...grpc.CallOption) <-chan unaryResult {
	ch := make(chan unaryResult, 1)
	go func() {
		var tr metadata.MD
		_, err := s.client.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 1}, append(opts, grpc.Trailer(&tr))...)
		ch <- unaryResult{err: err, trailer: tr}
	}()
	return ch
}

func receive[V any](t *testing.T, what string, ch <-chan V) V {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s after 20 s", what)
		panic("unreachable")
	}
}

// details are a rejection's decoded error details.
type details struct {
	code  codes.Code
	info  *errdetails.ErrorInfo
	retry *errdetails.RetryInfo
}

func detailsOf(t *testing.T, err error) details {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error %v is not a status", err)
	}
	d := details{code: st.Code()}
	for _, x := range st.Details() {
		switch v := x.(type) {
		case *errdetails.ErrorInfo:
			d.info = v
		case *errdetails.RetryInfo:
			d.retry = v
		case error:
			t.Fatalf("undecodable detail: %v", v)
		}
	}
	return d
}
