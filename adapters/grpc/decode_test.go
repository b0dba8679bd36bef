package resiliencegrpc_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestShedCallNotDecoded: behind the registrar a shed unary call is
// refused before its request message is decoded; behind the interceptors
// grpc-go has decoded it already (the documented difference).
func TestShedCallNotDecoded(t *testing.T) {
	for _, c := range []struct {
		how  mode
		want int64 // messages decoded: the held call's, plus the shed one's
	}{{viaRegistrar, 1}, {viaInterceptors, 2}} {
		t.Run(c.how.String(), func(t *testing.T) {
			g := make(gate)
			svc, entered := holdOne(g)
			s := start(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, svc, c.how)
			defer g.open()
			held := s.callUnary(context.Background())
			receive(t, "held call in its handler", entered)
			r := receive(t, "shed call", s.callUnary(context.Background()))
			if status.Code(r.err) != codes.Unavailable {
				t.Fatalf("shed call: %v, want UNAVAILABLE", r.err)
			}
			if n := s.codec.decoded.Load(); n != c.want {
				t.Errorf("%d request messages decoded, want %d", n, c.want)
			}
			g.open()
			receive(t, "held call", held)
		})
	}
}
