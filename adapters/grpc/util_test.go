package resiliencegrpc_test

import (
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// metadataHeader captures a call's response headers.
type metadataHeader struct{ md metadata.MD }

func (h *metadataHeader) option() grpc.CallOption { return grpc.Header(&h.md) }
