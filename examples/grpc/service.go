package main

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The report service, described by hand (google.protobuf well-known types
// as messages) so the example needs no generated code. A generated
// Register…Server function does the same through the registrar.
const (
	serviceName     = "example.v1.ReportService"
	buildMethod     = "/" + serviceName + "/Build"
	followMethod    = "/" + serviceName + "/Follow"
	maxBuildMS      = 60000
	followInterval  = 100 * time.Millisecond
	maxFollowEvents = 100
)

// reportServer is the service's implementation type, the HandlerType
// grpc-go checks the implementation against.
type reportServer interface {
	Build(ctx context.Context, ms *wrapperspb.Int64Value) (*wrapperspb.StringValue, error)
	Follow(n *wrapperspb.Int64Value, stream grpc.ServerStream) error
}

var reportServiceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*reportServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Build",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.Int64Value)
			if err := dec(in); err != nil {
				return nil, err
			}
			call := func(ctx context.Context, req any) (any, error) {
				return srv.(reportServer).Build(ctx, req.(*wrapperspb.Int64Value))
			}
			if interceptor == nil {
				return call(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: buildMethod}, call)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Follow",
		ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			in := new(wrapperspb.Int64Value)
			if err := stream.RecvMsg(in); err != nil {
				return err
			}
			return srv.(reportServer).Follow(in, stream)
		},
	}},
}

// reports implements the service.
type reports struct{}

// Build works for ms milliseconds, stopping when its context ends.
func (reports) Build(ctx context.Context, ms *wrapperspb.Int64Value) (*wrapperspb.StringValue, error) {
	if ms.GetValue() < 0 || ms.GetValue() > maxBuildMS {
		return nil, status.Error(codes.InvalidArgument, "ms must be from 0 to 60000")
	}
	d := time.Duration(ms.GetValue()) * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return wrapperspb.String("built in " + d.String()), nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// Follow sends n progress messages, followInterval apart.
func (reports) Follow(n *wrapperspb.Int64Value, stream grpc.ServerStream) error {
	if n.GetValue() < 1 || n.GetValue() > maxFollowEvents {
		return status.Error(codes.InvalidArgument, "n must be from 1 to 100")
	}
	for i := range n.GetValue() {
		if i > 0 {
			select {
			case <-time.After(followInterval):
			case <-stream.Context().Done():
				return status.FromContextError(stream.Context().Err()).Err()
			}
		}
		if err := stream.SendMsg(wrapperspb.String(fmt.Sprintf("step %d of %d", i+1, n.GetValue()))); err != nil {
			return err
		}
	}
	return nil
}
