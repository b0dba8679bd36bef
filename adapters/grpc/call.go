package resiliencegrpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Call is what priority and rate-limit key functions know about an RPC
// before it is admitted, read with CallFrom. The function's own ctx also
// answers grpc-go's accessors (metadata.FromIncomingContext,
// peer.FromContext, grpc.Method), since it is derived from the RPC's
// context.
type Call struct {
	// FullMethod is the RPC's method, "/pkg.Service/Method": the view's
	// Route and Path.
	FullMethod string
	// Metadata is the incoming metadata (the view's Header), keys in
	// lower case. Do not modify it.
	Metadata metadata.MD
	// Peer is the caller as grpc-go saw it (the view's RemoteAddr), or nil.
	Peer *peer.Peer
	// Context is the RPC's context as grpc-go passed it to the server.
	Context context.Context
}

// CallFrom returns the Call of the RPC whose priority or key function (or
// custom pipeline strategy) ctx is. It is built on each call from the
// RPC's context: call it once per function.
func CallFrom(ctx context.Context) (Call, bool) {
	v, ok := inbound.RequestFrom(ctx)
	if !ok {
		return Call{}, false
	}
	rc, ok := v.Raw.(context.Context)
	if !ok {
		return Call{}, false
	}
	method, _ := grpc.Method(rc)
	md, _ := metadata.FromIncomingContext(rc)
	p, _ := peer.FromContext(rc)
	return Call{FullMethod: method, Metadata: md, Peer: p, Context: rc}, true
}

// framework tells inbound how to read an RPC: Request.Raw is the RPC's
// context (no allocation per call), the route and path are the full
// method, the headers the incoming metadata, the remote address the peer's.
var framework = inbound.Framework{
	Route: func(raw any) string {
		m, _ := grpc.Method(raw.(context.Context))
		return m
	},
	View: func(raw any, v *inbound.Request) {
		ctx := raw.(context.Context)
		v.Method = "POST" // every gRPC call is an HTTP/2 POST
		v.Path, _ = grpc.Method(ctx)
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			v.RemoteAddr = p.Addr.String()
		}
		md, _ := metadata.FromIncomingContext(ctx)
		v.Header = mdHeaders(md)
	},
	// The RateLimit fields of an admitted call on a rate-limited route go
	// out as response headers.
	SetHeader: func(raw any, name, value string) {
		_ = grpc.SetHeader(raw.(context.Context), metadata.Pairs(name, value))
	},
}

// mdHeaders reads incoming metadata as inbound.Headers: metadata.MD
// lower-cases the name it is asked for, so lookups ignore case.
type mdHeaders metadata.MD

func (h mdHeaders) Get(name string) string {
	if vs := metadata.MD(h).Get(name); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

func (h mdHeaders) Values(name string) []string { return metadata.MD(h).Get(name) }
