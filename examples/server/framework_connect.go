package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// The Connect procedures beside the plain routes: the same work, as RPCs
// any Connect, gRPC or gRPC-Web client can call. The request is the work's
// duration in milliseconds (google.protobuf.Int64Value), the response what
// was done (google.protobuf.StringValue), so no generated code is needed:
//
//	curl -s -H 'Content-Type: application/json' -d 200 http://HOST/resilience.example.v1.WorkService/Work
const (
	workProcedure        = "/resilience.example.v1.WorkService/Work"
	cooperativeProcedure = "/resilience.example.v1.WorkService/Cooperative"
)

func init() { register("connect", connectServer) }

// connectServer serves the routes behind the connect adapter: /healthz and
// /debug/limits outside it; /work, /cooperative and the two procedures
// behind it, sharing its limits.
func connectServer(cfg config) (http.Handler, *inbound.Middleware, error) {
	mw, err := resilienceconnect.New(inboundOptions(cfg))
	if err != nil {
		return nil, nil, asFlagError(err)
	}
	shed := http.NewServeMux()
	shed.HandleFunc("GET /work", workHandler)
	shed.HandleFunc("GET /cooperative", cooperativeHandler)
	shed.HandleFunc("GET /export", exportHandler)
	shed.Handle(workProcedure, connect.NewUnaryHandler(workProcedure, workRPC, mw.HandlerOption()))
	shed.Handle(cooperativeProcedure, connect.NewUnaryHandler(cooperativeProcedure, cooperativeRPC, mw.HandlerOption()))

	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", healthz)
	root.Handle("GET /debug/limits", limitsHandler(mw.Inbound()))
	root.Handle("/", mw.Handler(shed))
	return root, mw.Inbound(), nil
}

// rpcDuration checks the requested duration as workDuration does.
func rpcDuration(req *connect.Request[wrapperspb.Int64Value]) (time.Duration, error) {
	ms := req.Msg.GetValue()
	if ms < 0 || ms > maxWorkMS {
		return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("ms must be an integer from 0 to 60000"))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// workRPC is workHandler as a procedure: it ignores its context.
func workRPC(_ context.Context, req *connect.Request[wrapperspb.Int64Value]) (*connect.Response[wrapperspb.StringValue], error) {
	d, err := rpcDuration(req)
	if err != nil {
		return nil, err
	}
	time.Sleep(d)
	return connect.NewResponse(wrapperspb.String("worked " + d.String())), nil
}

// cooperativeRPC is cooperativeHandler as a procedure: it stops when its
// context is done.
func cooperativeRPC(ctx context.Context, req *connect.Request[wrapperspb.Int64Value]) (*connect.Response[wrapperspb.StringValue], error) {
	d, err := rpcDuration(req)
	if err != nil {
		return nil, err
	}
	if err := sleepCtx(ctx, d); err != nil {
		return nil, connect.NewError(connect.CodeDeadlineExceeded, errors.New("stopped at the deadline"))
	}
	return connect.NewResponse(wrapperspb.String("worked " + d.String())), nil
}
