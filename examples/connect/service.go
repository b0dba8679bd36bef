package main

import (
	"context"
	"errors"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

const (
	buildProcedure  = "/example.v1.ReportService/Build"
	followProcedure = "/example.v1.ReportService/Follow"
	maxBuildMS      = 60_000
	maxFollow       = 100
)

// config is the service's limits.
type config struct {
	permits, queue, rate  int
	timeout, queueTimeout time.Duration
}

// newServer builds the routes: the two procedures behind the adapter,
// /healthz and /debug/limits outside it.
func newServer(cfg config) (http.Handler, *resilienceconnect.Middleware, error) {
	mw, err := resilienceconnect.New(inbound.Options{
		Name:    "reports",
		Timeout: cfg.timeout,
		Concurrency: &resilience.ConcurrencyLimiterOptions{
			PermitLimit:  cfg.permits,
			QueueLimit:   cfg.queue,
			QueueTimeout: cfg.queueTimeout,
			Overflow:     resilience.OverflowDropLowestPriority,
			Priority:     streamsLast,
		},
		RateLimit: &resilience.RateLimiterOptions{
			PermitLimit: cfg.rate,
			Window:      time.Second,
			Key:         by.Header("X-Tenant"),
		},
	})
	if err != nil {
		return nil, nil, err
	}
	calls := http.NewServeMux()
	calls.Handle(buildProcedure, connect.NewUnaryHandler(buildProcedure, build, mw.HandlerOption()))
	calls.Handle(followProcedure, connect.NewServerStreamHandler(followProcedure, follow, mw.HandlerOption()))

	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	root.Handle("GET /debug/limits", mw.StatsHandler())
	root.Handle("/", mw.Handler(calls))
	return root, mw, nil
}

// streamsLast is the priority function: unary calls (0) before streams
// (1), which hold a permit for long.
func streamsLast(ctx context.Context) int {
	c, ok := resilienceconnect.CallFrom(ctx)
	if !ok {
		return 0
	}
	if spec, _ := c.Spec(); spec.StreamType != connect.StreamTypeUnary {
		return 1
	}
	return 0
}

// build simulates building a report for the requested milliseconds; it
// stops when its context ends.
func build(ctx context.Context, req *connect.Request[wrapperspb.Int64Value]) (*connect.Response[wrapperspb.StringValue], error) {
	ms := req.Msg.GetValue()
	if ms < 0 || ms > maxBuildMS {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("ms must be from 0 to 60000"))
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, connect.NewError(connect.CodeDeadlineExceeded, errors.New("report abandoned"))
	}
	return connect.NewResponse(wrapperspb.String("report built in " + strconv.FormatInt(ms, 10) + "ms")), nil
}

// follow streams n progress messages, 100 ms apart.
func follow(ctx context.Context, req *connect.Request[wrapperspb.Int64Value], st *connect.ServerStream[wrapperspb.StringValue]) error {
	n := req.Msg.GetValue()
	if n < 0 || n > maxFollow {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("n must be from 0 to 100"))
	}
	for i := int64(1); i <= n; i++ {
		if err := st.Send(wrapperspb.String("step " + strconv.FormatInt(i, 10))); err != nil {
			return err
		}
		if i == n {
			break
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	return nil
}
