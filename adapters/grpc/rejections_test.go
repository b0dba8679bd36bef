package resiliencegrpc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// holdOne returns a service whose unary calls wait for g, and a channel
// that receives once per call that entered the handler.
func holdOne(g gate) (*service, <-chan struct{}) {
	entered := make(chan struct{}, 16)
	return &service{unary: func(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		entered <- struct{}{}
		<-g
		return &testpb.SimpleResponse{}, nil
	}}, entered
}

// checkRejection asserts the code, the ErrorInfo (domain, reason and the
// limiter's reason), the RetryInfo and the pushback trailer of a
// rejection, as a grpc-go client decodes them.
func checkRejection(t *testing.T, r unaryResult, code codes.Code, infoReason, reason string, retry time.Duration, pushback string) {
	t.Helper()
	d := detailsOf(t, r.err)
	if d.code != code {
		t.Fatalf("code %v, want %v (%v)", d.code, code, r.err)
	}
	if d.info == nil || d.info.Domain != resiliencegrpc.ErrorDomain || d.info.Reason != infoReason || d.info.Metadata["reason"] != reason {
		t.Errorf("ErrorInfo %v, want domain %q reason %q metadata reason %q", d.info, resiliencegrpc.ErrorDomain, infoReason, reason)
	}
	switch {
	case retry == 0 && d.retry != nil:
		t.Errorf("RetryInfo %v, want none", d.retry)
	case retry > 0 && (d.retry == nil || d.retry.RetryDelay.AsDuration() != retry):
		t.Errorf("RetryInfo %v, want a delay of %v", d.retry, retry)
	}
	got := r.trailer.Get(resiliencegrpc.PushbackTrailer)
	if pushback == "" && len(got) != 0 || pushback != "" && (len(got) != 1 || got[0] != pushback) {
		t.Errorf("trailer %s %q, want %q", resiliencegrpc.PushbackTrailer, got, pushback)
	}
}

// TestCapacityRejections: a full queue, a queue timeout and an eviction
// are UNAVAILABLE with the limiter's reason, a second of RetryInfo and a
// 1000 ms pushback, through the registrar and the interceptors alike.
func TestCapacityRejections(t *testing.T) {
	for _, how := range []mode{viaRegistrar, viaInterceptors} {
		t.Run(how.String(), func(t *testing.T) {
			g := make(gate)
			svc, entered := holdOne(g)
			s := start(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{
				PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Second, Overflow: resilience.OverflowDropOldest,
			}}, svc, how)
			defer g.open()
			held := s.callUnary(context.Background())
			receive(t, "held call in its handler", entered)

			queued := s.callUnary(context.Background())
			s.waitStats("one queued", func(st inbound.Stats) bool { return st.Queued == 1 })
			// drop-oldest: the newcomer takes the queue place, the first
			// waiter is evicted.
			second := s.callUnary(context.Background())
			checkRejection(t, receive(t, "evicted call", queued), codes.Unavailable, inbound.CodeBulkheadFull, string(resilience.ReasonDropped), time.Second, "1000")
			checkRejection(t, receive(t, "queue-timeout call", second), codes.Unavailable, inbound.CodeBulkheadFull, string(resilience.ReasonQueueTimeout), time.Second, "1000")

			g.open()
			if r := receive(t, "held call", held); r.err != nil {
				t.Fatalf("held call: %v", r.err)
			}
		})
	}
}

// TestCapacityRetryAfter: Options.RetryAfter is the capacity rejection's
// advice, as for the HTTP adapters' 503s: retry-after in whole seconds
// (rounded up), RetryInfo and a pushback in milliseconds; 0 is a second,
// and a negative value sends none of the three.
func TestCapacityRetryAfter(t *testing.T) {
	for _, c := range []struct {
		retryAfter time.Duration
		retry      time.Duration
		pushback   string
		field      string
	}{
		{0, time.Second, "1000", "1"},
		{2500 * time.Millisecond, 2500 * time.Millisecond, "2500", "3"},
		{-1, 0, "", ""},
	} {
		g := make(gate)
		svc, entered := holdOne(g)
		s := start(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}, RetryAfter: c.retryAfter}, svc, viaRegistrar)
		held := s.callUnary(context.Background())
		receive(t, "held call in its handler", entered)
		r := receive(t, "rejected call", s.callUnary(context.Background()))
		checkRejection(t, r, codes.Unavailable, inbound.CodeBulkheadFull, string(resilience.ReasonFull), c.retry, c.pushback)
		if got := r.trailer.Get("retry-after"); c.field == "" && len(got) != 0 || c.field != "" && (len(got) != 1 || got[0] != c.field) {
			t.Errorf("RetryAfter %v: retry-after %q, want %q", c.retryAfter, got, c.field)
		}
		g.open()
		receive(t, "held call", held)
	}
}

// TestCapacityRejectionOnRateLimitedRoute: a call within its rate limit
// refused by a full limiter carries its decision's RateLimit fields
// beside retry-after, in the trailers of its trailers-only answer (never
// as response headers: grpc-go would send those in a HEADERS frame of
// their own, and a client's retry policy would no longer retry the call),
// for a timed call too.
func TestCapacityRejectionOnRateLimitedRoute(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Minute} {
		g := make(gate)
		svc, entered := holdOne(g)
		s := start(t, inbound.Options{Timeout: timeout, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
			RateLimit: &resilience.RateLimiterOptions{PermitLimit: 5, Window: time.Minute}}, svc, viaRegistrar)
		held := s.callUnary(context.Background())
		receive(t, "held call in its handler", entered)
		var h metadataHeader
		r := receive(t, "rejected call", s.callUnary(context.Background(), h.option()))
		checkRejection(t, r, codes.Unavailable, inbound.CodeBulkheadFull, string(resilience.ReasonFull), time.Second, "1000")
		for k, want := range map[string]string{"retry-after": "1", "ratelimit-limit": "5", "ratelimit-remaining": "3"} {
			if got := r.trailer.Get(k); len(got) != 1 || got[0] != want {
				t.Errorf("timeout %v: trailer %s %q, want %q (trailers %v)", timeout, k, got, want, r.trailer)
			}
		}
		if got := h.md.Get("ratelimit-limit"); len(got) != 0 {
			t.Errorf("timeout %v: ratelimit-limit in the response headers %q: not a trailers-only answer", timeout, got)
		}
		g.open()
		receive(t, "held call", held)
	}
}

// TestQueueFullRejectsAtOnce: without a queue place the call is refused
// UNAVAILABLE reason full.
func TestQueueFullRejectsAtOnce(t *testing.T) {
	g := make(gate)
	svc, entered := holdOne(g)
	s := start(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, svc, viaRegistrar)
	defer g.open()
	held := s.callUnary(context.Background())
	receive(t, "held call in its handler", entered)
	checkRejection(t, receive(t, "rejected call", s.callUnary(context.Background())), codes.Unavailable, inbound.CodeBulkheadFull, string(resilience.ReasonFull), time.Second, "1000")
	g.open()
	receive(t, "held call", held)
}

// TestRateLimited: over quota is RESOURCE_EXHAUSTED with the limiter's
// wait as RetryInfo and pushback, and the RateLimit fields as trailers;
// an admitted call of the route gets the fields as headers.
func TestRateLimited(t *testing.T) {
	s := start(t, inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Minute}}, &service{}, viaRegistrar)
	first := receive(t, "first call", s.callUnary(context.Background()))
	if first.err != nil {
		t.Fatalf("first call: %v", first.err)
	}
	r := receive(t, "second call", s.callUnary(context.Background()))
	d := detailsOf(t, r.err)
	if d.code != codes.ResourceExhausted || d.info == nil || d.info.Reason != inbound.CodeRateLimited || d.info.Domain != resiliencegrpc.ErrorDomain {
		t.Fatalf("got %v %v, want RESOURCE_EXHAUSTED RATE_LIMITED", d.code, d.info)
	}
	if d.retry == nil || d.retry.RetryDelay.AsDuration() <= 0 || d.retry.RetryDelay.AsDuration() > time.Minute {
		t.Errorf("RetryInfo %v, want the limiter's wait (0, 1m]", d.retry)
	}
	if pb := r.trailer.Get(resiliencegrpc.PushbackTrailer); len(pb) != 1 || pb[0] == "" || pb[0][0] == '-' {
		t.Errorf("pushback %q, want the wait in ms", pb)
	}
	if len(r.trailer.Get("retry-after")) != 1 || len(r.trailer.Get("ratelimit-limit")) != 1 {
		t.Errorf("trailers %v, want Retry-After and the RateLimit fields", r.trailer)
	}
	// The message points a gRPC client at the RetryInfo detail and the
	// pushback its retry policy reads, not at HTTP's Retry-After header.
	if msg := status.Convert(r.err).Message(); !strings.Contains(msg, "RetryInfo") || !strings.Contains(msg, "grpc-retry-pushback-ms") || strings.Contains(msg, "Retry-After") {
		t.Errorf("message %q, want it to name RetryInfo and grpc-retry-pushback-ms", msg)
	}
}

// TestRateLimitHeadersOnAdmitted: an admitted call of a rate-limited route
// carries the RateLimit fields in its response headers.
func TestRateLimitHeadersOnAdmitted(t *testing.T) {
	for _, opts := range []inbound.Options{
		{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 5, Window: time.Minute}},
		{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 5, Window: time.Minute}, Timeout: time.Minute},
	} {
		s := start(t, opts, &service{}, viaRegistrar)
		var h metadataHeader
		_, err := s.client.UnaryCall(context.Background(), &testpb.SimpleRequest{}, h.option())
		if err != nil {
			t.Fatal(err)
		}
		if got := h.md.Get("ratelimit-remaining"); len(got) != 1 || got[0] != "4" {
			t.Errorf("timeout %v: ratelimit-remaining %q, want 4 (headers %v)", opts.Timeout, got, h.md)
		}
	}
}

// TestShuttingDownSaysDoNotRetry: a draining middleware answers
// UNAVAILABLE shutting-down with a negative pushback and no RetryInfo.
func TestShuttingDownSaysDoNotRetry(t *testing.T) {
	s := start(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4}}, &service{}, viaRegistrar)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.mw.Inbound().Drain(ctx)
	checkRejection(t, receive(t, "call", s.callUnary(context.Background())), codes.Unavailable, inbound.CodeBulkheadFull, string(resilience.ReasonShuttingDown), 0, "-1")
}

// TestRenderRefused: Options.Render restyles HTTP responses; gRPC sends
// none, so New says so rather than ignore it.
func TestRenderRefused(t *testing.T) {
	_, err := resiliencegrpc.New(inbound.Options{Render: func(_ error, d inbound.Response) inbound.Response { return d }})
	var ce *resilience.ConfigError
	if !errorsAs(err, &ce) || ce.Field != "Options.Render" {
		t.Fatalf("New: %v, want a ConfigError for Options.Render", err)
	}
}
