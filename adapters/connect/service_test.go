package resilienceconnect_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// A hand-written service: three procedures on well-known message types, so
// no generated code is needed.
const (
	sayProcedure   = "/test.v1.EchoService/Say"   // unary
	countProcedure = "/test.v1.EchoService/Count" // server stream
	chatProcedure  = "/test.v1.EchoService/Chat"  // bidi stream
	floodProcedure = "/test.v1.EchoService/Flood" // server stream, never ends by itself
)

// Messages that steer the service's handlers.
const (
	msgHold  = "hold"  // hold until released, ignoring the context
	msgWatch = "watch" // hold until released or the context ends
)

// service runs the procedures. Each call announces itself on entered and,
// when told to hold, waits for release; on leaving it reports its
// context's error on exited.
type service struct {
	entered chan string
	exited  chan error
	release chan struct{}
	once    sync.Once
}

func newService() *service {
	return &service{entered: make(chan string, 64), exited: make(chan error, 64), release: make(chan struct{})}
}

func (s *service) open() { s.once.Do(func() { close(s.release) }) }

// hold waits as msg says and reports how the call ended.
func (s *service) hold(ctx context.Context, msg string) {
	switch msg {
	case msgHold:
		<-s.release
	case msgWatch:
		select {
		case <-s.release:
		case <-ctx.Done():
		}
	}
}

func (s *service) say(ctx context.Context, req *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
	s.entered <- sayProcedure
	defer func() { s.exited <- ctx.Err() }()
	s.hold(ctx, req.Msg.GetValue())
	return connect.NewResponse(wrapperspb.String("hello " + req.Msg.GetValue())), nil
}

// count sends "1", then holds as the request says, then sends "2".
func (s *service) count(ctx context.Context, req *connect.Request[wrapperspb.StringValue], st *connect.ServerStream[wrapperspb.StringValue]) error {
	s.entered <- countProcedure
	defer func() { s.exited <- ctx.Err() }()
	if err := st.Send(wrapperspb.String("1")); err != nil {
		return err
	}
	s.hold(ctx, req.Msg.GetValue())
	return st.Send(wrapperspb.String("2"))
}

// flood sends large messages until a send fails, ignoring its context.
func (s *service) flood(ctx context.Context, _ *connect.Request[wrapperspb.StringValue], st *connect.ServerStream[wrapperspb.StringValue]) error {
	s.entered <- floodProcedure
	defer func() { s.exited <- ctx.Err() }()
	big := wrapperspb.String(strings.Repeat("x", 64<<10))
	for {
		if err := st.Send(big); err != nil {
			return err
		}
	}
}

// chat echoes each message; a message that says to hold is echoed first.
func (s *service) chat(ctx context.Context, st *connect.BidiStream[wrapperspb.StringValue, wrapperspb.StringValue]) error {
	s.entered <- chatProcedure
	defer func() { s.exited <- ctx.Err() }()
	for {
		m, err := st.Receive()
		if err != nil {
			return nil // the client closed its side
		}
		if err := st.Send(wrapperspb.String("echo " + m.GetValue())); err != nil {
			return err
		}
		s.hold(ctx, m.GetValue())
	}
}

// mux mounts the service's handlers with opts.
func (s *service) mux(opts ...connect.HandlerOption) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(sayProcedure, connect.NewUnaryHandler(sayProcedure, s.say, opts...))
	mux.Handle(countProcedure, connect.NewServerStreamHandler(countProcedure, s.count, opts...))
	mux.Handle(chatProcedure, connect.NewBidiStreamHandler(chatProcedure, s.chat, opts...))
	mux.Handle(floodProcedure, connect.NewServerStreamHandler(floodProcedure, s.flood, opts...))
	return mux
}

func (s *service) waitEntered(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-s.entered:
		if got != want {
			t.Fatalf("%s entered the handler, want %s", got, want)
		}
	case <-time.After(waitLimit):
		t.Fatalf("%s did not enter the handler within %v", want, waitLimit)
	}
}

func (s *service) notEntered(t *testing.T) {
	t.Helper()
	select {
	case got := <-s.entered:
		t.Errorf("%s entered the handler; it must not run", got)
	default:
	}
}

func (s *service) waitExited(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.exited:
		return err
	case <-time.After(waitLimit):
		t.Fatalf("the handler did not return within %v", waitLimit)
		return nil
	}
}

// waitLimit bounds every wait; it is generous for a loaded machine.
const waitLimit = 10 * time.Second

// protocol is one of the three wire protocols a connect client speaks.
type protocol struct {
	name string
	opts []connect.ClientOption
}

var protocols = []protocol{
	{"connect", nil},
	{"grpc", []connect.ClientOption{connect.WithGRPC()}},
	{"grpcweb", []connect.ClientOption{connect.WithGRPCWeb()}},
}

// testServer is a loopback server speaking HTTP/1.1 and cleartext HTTP/2
// (gRPC and bidi streams need HTTP/2), with a client for it.
type testServer struct {
	url    string
	client *http.Client
	mw     *resilienceconnect.Middleware
	svc    *service
}

func startServer(t *testing.T, opts inbound.Options) *testServer {
	t.Helper()
	mw, err := resilienceconnect.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	svc := newService()
	srv := httptest.NewUnstartedServer(mw.Handler(svc.mux(mw.HandlerOption())))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	ts := &testServer{url: srv.URL, client: &http.Client{Transport: tr}, mw: mw, svc: svc}
	t.Cleanup(func() {
		svc.open()
		waitFor(t, "permits returned", func() bool { s := mw.Stats(); return s.InFlight == 0 && s.Queued == 0 && s.Late == 0 })
		tr.CloseIdleConnections()
		srv.Close()
	})
	return ts
}

func (ts *testServer) say(p protocol) *connect.Client[wrapperspb.StringValue, wrapperspb.StringValue] {
	return connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](ts.client, ts.url+sayProcedure, p.opts...)
}

func (ts *testServer) count(p protocol) *connect.Client[wrapperspb.StringValue, wrapperspb.StringValue] {
	return connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](ts.client, ts.url+countProcedure, p.opts...)
}

func (ts *testServer) chat(p protocol) *connect.Client[wrapperspb.StringValue, wrapperspb.StringValue] {
	return connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](ts.client, ts.url+chatProcedure, p.opts...)
}

// callSay makes a unary call on its own goroutine.
func (ts *testServer) callSay(ctx context.Context, p protocol, msg string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := ts.say(p).CallUnary(ctx, connect.NewRequest(wrapperspb.String(msg)))
		ch <- err
	}()
	return ch
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: gave up after %v", what, waitLimit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func await(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(waitLimit):
		t.Fatalf("%s: no answer within %v", what, waitLimit)
		return nil
	}
}

// expectCode checks that err is a connect error with code, carrying the
// rejection's ErrorInfo reason (and limiter reason, when not empty).
func expectCode(t *testing.T, what string, err error, code connect.Code, infoReason, reason string) *connect.Error {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%s: got %v, want a connect error %v", what, err, code)
	}
	if ce.Code() != code {
		t.Fatalf("%s: code %v (%v), want %v", what, ce.Code(), err, code)
	}
	if infoReason == "" {
		return ce
	}
	info, ok := errorInfoOf(ce)
	if !ok {
		t.Fatalf("%s: no google.rpc.ErrorInfo detail in %v", what, ce.Details())
	}
	if info.reason != infoReason || info.domain != resilienceconnect.ErrorDomain || info.metadata["reason"] != reason {
		t.Errorf("%s: ErrorInfo %+v, want reason %s, domain %s, metadata reason %q", what, info, infoReason, resilienceconnect.ErrorDomain, reason)
	}
	if strings.Contains(ce.Message(), "resilience:") {
		t.Errorf("%s: message %q carries internal error text", what, ce.Message())
	}
	return ce
}
