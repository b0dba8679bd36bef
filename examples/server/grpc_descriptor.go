package main

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	_ "google.golang.org/protobuf/types/known/wrapperspb" // registers google/protobuf/wrappers.proto first
)

// workProtoFile is the name, under examples/server/proto, of the .proto
// file that defines the work service.
const workProtoFile = "resilience/example/v1/work.proto"

// The work service's descriptor (the one work.proto compiles to: the
// service is served through a hand-written grpc.ServiceDesc, without
// generated code) is registered with protobuf's global registry, where
// gRPC server reflection looks services up: grpcurl and other tools can
// then list, describe and call it. A test holds it to work.proto.
func init() {
	fd, err := protodesc.NewFile(workFileDescriptor(), protoregistry.GlobalFiles)
	if err != nil {
		panic("work.proto descriptor: " + err.Error()) // a programming error, found by every test
	}
	if err := protoregistry.GlobalFiles.RegisterFile(fd); err != nil {
		panic("work.proto descriptor: " + err.Error())
	}
}

// workFileDescriptor is work.proto as a descriptor.
func workFileDescriptor() *descriptorpb.FileDescriptorProto {
	method := func(name string) *descriptorpb.MethodDescriptorProto {
		return &descriptorpb.MethodDescriptorProto{
			Name:       proto.String(name),
			InputType:  proto.String(".google.protobuf.Int64Value"),
			OutputType: proto.String(".google.protobuf.StringValue"),
		}
	}
	return &descriptorpb.FileDescriptorProto{
		Name:       proto.String(workProtoFile),
		Package:    proto.String("resilience.example.v1"),
		Dependency: []string{"google/protobuf/wrappers.proto"},
		Syntax:     proto.String("proto3"),
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name:   proto.String("WorkService"),
			Method: []*descriptorpb.MethodDescriptorProto{method("Work"), method("Cooperative")},
		}},
	}
}
