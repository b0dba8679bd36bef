package grpcinterop

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/types/known/emptypb"
)

// attempt is what grpc-go's client saw of one attempt of a call.
type attempt struct {
	begin    time.Time
	pushback []string // grpc-retry-pushback-ms of its trailers-only answer or trailers
}

// attempts records every attempt of the calls on one connection, through
// a stats handler: grpc-go reports each attempt (first call and retries)
// to it, with the trailers the attempt ended on.
type attempts struct {
	mu   sync.Mutex
	list []attempt
}

type attemptKey struct{}

func (a *attempts) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = append(a.list, attempt{})
	return context.WithValue(ctx, attemptKey{}, len(a.list)-1)
}

func (a *attempts) HandleRPC(ctx context.Context, s stats.RPCStats) {
	i, _ := ctx.Value(attemptKey{}).(int)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch s := s.(type) {
	case *stats.Begin:
		a.list[i].begin = s.BeginTime
	case *stats.InTrailer:
		a.list[i].pushback = s.Trailer.Get("grpc-retry-pushback-ms")
	}
}

func (*attempts) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (*attempts) HandleConn(context.Context, stats.ConnStats)                       {}

// since returns the attempts recorded from index from on.
func (a *attempts) since(from int) []attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]attempt(nil), a.list[from:]...)
}

func (a *attempts) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.list)
}

// retryConfig is a service config whose retry policy makes up to
// maxAttempts attempts of method on the given codes. Its own backoff is
// short (10 ms) so that a spacing near the server's pushback can only come
// from the pushback.
func retryConfig(maxAttempts int, codes ...string) string {
	quoted := ""
	for i, c := range codes {
		if i > 0 {
			quoted += ","
		}
		quoted += fmt.Sprintf("%q", c)
	}
	return fmt.Sprintf(`{"methodConfig":[{"name":[{"service":"interop.v1.Interop"}],"retryPolicy":{`+
		`"maxAttempts":%d,"initialBackoff":"0.01s","maxBackoff":"0.01s","backoffMultiplier":1,`+
		`"retryableStatusCodes":[%s]}}]}`, maxAttempts, quoted)
}

// dial connects grpc-go's client to addr with the service config (may be
// empty) and returns the connection and its attempt record.
func dial(t *testing.T, addr, serviceConfig string) (*grpc.ClientConn, *attempts) {
	t.Helper()
	rec := &attempts{}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithStatsHandler(rec)}
	if serviceConfig != "" {
		opts = append(opts, grpc.WithDefaultServiceConfig(serviceConfig))
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc, rec
}

func invoke(ctx context.Context, cc *grpc.ClientConn) error {
	return cc.Invoke(ctx, method, &emptypb.Empty{}, &emptypb.Empty{})
}

// hold starts a call that holds the handler (and its permit) until g is
// released, and waits for it to enter the handler. The returned function
// releases it and reports its error.
func hold(t *testing.T, cc *grpc.ClientConn, g *gate) func() {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- invoke(context.Background(), cc) }()
	select {
	case <-g.entered:
	case err := <-done:
		t.Fatalf("holding call ended early: %v", err)
	}
	return func() {
		close(g.release)
		if err := <-done; err != nil {
			t.Errorf("holding call: %v", err)
		}
	}
}
