package resiliencegrpc_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestExpiredOnArrival: a call whose deadline has passed when it arrives is
// answered DEADLINE_EXCEEDED at once, its handler never run, whether a
// permit is free or not, with or without a timeout of the middleware. (A
// grpc-go client does not send such a call, so the interceptor is called
// directly; over the wire grpc-go's transport answers an expired call
// itself, as the interop tests in interop/grpc pin.)
func TestExpiredOnArrival(t *testing.T) {
	for _, opts := range []inbound.Options{
		{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}},
		{Timeout: time.Minute},
		{},
	} {
		mw, err := resiliencegrpc.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		ran := false
		_, err = mw.UnaryInterceptor()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/s/M"}, func(context.Context, any) (any, error) {
			ran = true
			return nil, nil
		})
		cancel()
		if d := detailsOf(t, err); d.code != codes.DeadlineExceeded || d.info == nil || d.info.Reason != inbound.CodeTimeout {
			t.Errorf("%+v: %v, want DEADLINE_EXCEEDED TIMEOUT", opts, err)
		}
		if ran {
			t.Errorf("%+v: the handler ran", opts)
		}
	}
}
