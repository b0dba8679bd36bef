package grpcinterop

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// method is the one unary procedure every target serves: it takes and
// returns a google.protobuf.Empty and runs the test's handler.
const method = "/interop.v1.Interop/Call"

// A target is one adapter under test: its serve serves method on a
// loopback listener (HTTP/2 without TLS) through the adapter built from
// opts, with handle as the method's body, until the test ends.
type target struct {
	name  string
	serve func(t *testing.T, opts inbound.Options, handle func(context.Context) error) server
	// deadlineFrames is the number of HEADERS frames the adapter sends when
	// it answers DEADLINE_EXCEEDED for a handler still running at its
	// deadline that sent nothing: 1 (trailers-only) for both adapters.
	deadlineFrames int
	// httpFields: the rejections also carry Retry-After and, when rate
	// limited, the RateLimit-* fields (connect sends its metadata in every
	// protocol; the grpc adapter sends inbound's fields as trailers).
	httpFields bool
	// callerDeadline, when set, says why the caller's own deadline is not
	// the adapter's to answer (grpc-go's transport resets the stream at
	// its grpc-timeout and answers a call that arrives expired itself):
	// the two caller-deadline cases then pin what the transport does.
	callerDeadline string
}

// server is a target serving.
type server struct {
	addr string
	// drain puts the adapter into its shutting-down state (arrivals
	// refused UNAVAILABLE, reason shutting-down) and returns.
	drain func()
	// queued reports the calls waiting in the adapter's queue.
	queued func() int
}

// targets lists the adapters every test runs against.
var targets = []target{
	{name: "connect", serve: serveConnect, deadlineFrames: 1, httpFields: true},
}

// eachTarget runs f as a subtest per target.
func eachTarget(t *testing.T, f func(t *testing.T, tg target)) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) { f(t, tg) })
	}
}

// serveConnect serves method with a connect handler behind
// resilienceconnect.Middleware, over h2c.
func serveConnect(t *testing.T, opts inbound.Options, handle func(context.Context) error) server {
	t.Helper()
	mw, err := resilienceconnect.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h := connect.NewUnaryHandler(method, func(ctx context.Context, _ *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
		if err := handle(ctx); err != nil {
			return nil, err
		}
		return connect.NewResponse(&emptypb.Empty{}), nil
	}, mw.HandlerOption())
	mux := http.NewServeMux()
	mux.Handle(method, mw.Handler(h))
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &protocols, ReadHeaderTimeout: 10 * time.Second}
	addr := listen(t, func(ln net.Listener) error { return srv.Serve(ln) })
	t.Cleanup(func() { _ = srv.Close() })
	drain := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := mw.Inbound().Drain(ctx); err != nil {
			t.Errorf("Drain: %v", err)
		}
	}
	return server{addr: addr, drain: drain, queued: func() int { return mw.Stats().Queued }}
}

// listen opens a loopback listener, runs serve on it until the test ends
// and returns its address.
func listen(t *testing.T, serve func(net.Listener) error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve(ln) }()
	t.Cleanup(func() {
		_ = ln.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// gate is a handler that holds its call (and its permit) until release.
type gate struct {
	entered chan struct{} // receives once per call that entered the handler
	release chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 16), release: make(chan struct{})} }

func (g *gate) handle(ctx context.Context) error {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
