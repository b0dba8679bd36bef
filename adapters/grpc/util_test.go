package resiliencegrpc_test

import (
	"errors"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// metadataHeader captures a call's response headers.
type metadataHeader struct{ md metadata.MD }

func (h *metadataHeader) option() grpc.CallOption { return grpc.Header(&h.md) }

// statusFromBytes decodes a google.rpc.Status.
func statusFromBytes(b []byte) (*status.Status, error) {
	var p spb.Status
	if err := proto.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	return status.FromProto(&p), nil
}
