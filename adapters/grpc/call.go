package resiliencegrpc

import (
	"context"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"

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
	r, ok := v.Raw.(*rpc)
	if !ok {
		return Call{}, false
	}
	rc := r.ctx
	method, _ := grpc.Method(rc)
	md, _ := metadata.FromIncomingContext(rc)
	p, _ := peer.FromContext(rc)
	return Call{FullMethod: method, Metadata: md, Peer: p, Context: rc}, true
}

// rpc is an RPC as inbound sees it (Request.Raw): its context, and the
// RateLimit fields of its rate-limit decision, held until the call is
// either admitted (then set as its response headers, before the handler
// runs) or refused (then sent with the rejection's trailers). Header
// metadata set on a call that is then refused makes grpc-go send a HEADERS
// frame ahead of the status, and a grpc-go client's retry policy never
// retries an answer that is not trailers-only. It lives in the call's
// state, so holding the fields allocates nothing.
type rpc struct {
	ctx    context.Context
	n      int
	fields [4]rpcField // inbound sets at most 3 per call
}

type rpcField struct{ key, value string }

// hold keeps a field for the call's answer.
func (r *rpc) hold(name, value string) {
	if r.n == len(r.fields) { // more than inbound sets today: as before
		_ = grpc.SetHeader(r.ctx, metadata.Pairs(name, value))
		return
	}
	r.fields[r.n] = rpcField{adapt.FieldKey(name), value}
	r.n++
}

// take returns md with the held fields added (a new MD: md is shared) and
// forgets them; md itself when none are held.
func (r *rpc) take(md metadata.MD) metadata.MD {
	if r.n == 0 {
		return md
	}
	out := make(metadata.MD, len(md)+r.n)
	for k, v := range md {
		out[k] = v
	}
	vals := make([]string, r.n)
	for i, f := range r.fields[:r.n] {
		vals[i] = f.value
		out[f.key] = vals[i : i+1 : i+1]
	}
	r.n, r.fields = 0, [4]rpcField{}
	return out
}

// admit sets the held fields as the call's response headers through ctx's
// stream (grpc-go's, or a timed call's guard of it).
func (r *rpc) admit(ctx context.Context) {
	if r.n > 0 {
		_ = grpc.SetHeader(ctx, r.take(nil)) // no stream in ctx: nothing to set
	}
}

// framework tells inbound how to read an RPC: Request.Raw is its *rpc
// (part of the call's state: no allocation per call), the route and path
// are the full method, the headers the incoming metadata, the remote
// address the peer's.
var framework = adapt.Framework{
	Route: func(raw any) string {
		m, _ := grpc.Method(raw.(*rpc).ctx)
		return m
	},
	View: func(raw any, v *inbound.Request) {
		ctx := raw.(*rpc).ctx
		v.Method = "POST" // every gRPC call is an HTTP/2 POST
		v.Path, _ = grpc.Method(ctx)
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			v.RemoteAddr = p.Addr.String()
		}
		md, _ := metadata.FromIncomingContext(ctx)
		v.Header = mdHeaders(md)
	},
	// The RateLimit fields of a call on a rate-limited route wait for its
	// admission or refusal.
	SetHeader: func(raw any, name, value string) { raw.(*rpc).hold(name, value) },
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
