package main

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	_ "google.golang.org/protobuf/types/known/wrapperspb" // registers google/protobuf/wrappers.proto first
)

// reportProtoFile is the name, under examples/grpc/proto, of the .proto
// file that defines the report service.
const reportProtoFile = "example/v1/report.proto"

// The report service's descriptor (what report.proto compiles to; the
// service itself is the hand-written reportServiceDesc) is registered
// with protobuf's global registry, where gRPC server reflection looks
// services up, so that grpcurl and other tools can list, describe and
// call it. A test holds it to report.proto.
func init() {
	fd, err := protodesc.NewFile(reportFileDescriptor(), protoregistry.GlobalFiles)
	if err == nil {
		err = protoregistry.GlobalFiles.RegisterFile(fd)
	}
	if err != nil {
		panic("report.proto descriptor: " + err.Error()) // a programming error, found by every test
	}
}

// reportFileDescriptor is report.proto as a descriptor.
func reportFileDescriptor() *descriptorpb.FileDescriptorProto {
	method := func(name string, serverStreams bool) *descriptorpb.MethodDescriptorProto {
		m := &descriptorpb.MethodDescriptorProto{
			Name:       proto.String(name),
			InputType:  proto.String(".google.protobuf.Int64Value"),
			OutputType: proto.String(".google.protobuf.StringValue"),
		}
		if serverStreams {
			m.ServerStreaming = proto.Bool(true)
		}
		return m
	}
	return &descriptorpb.FileDescriptorProto{
		Name:       proto.String(reportProtoFile),
		Package:    proto.String("example.v1"),
		Dependency: []string{"google/protobuf/wrappers.proto"},
		Syntax:     proto.String("proto3"),
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name:   proto.String("ReportService"),
			Method: []*descriptorpb.MethodDescriptorProto{method("Build", false), method("Follow", true)},
		}},
	}
}

// tryLines are the grpcurl lines the program prints after its address,
// each working as printed (the one with -proto from the repository root).
func tryLines(addr string) string {
	build, follow := buildMethod[1:], followMethod[1:] // grpcurl names a method without the leading slash
	return "try (grpcurl; server reflection is on; in JSON an Int64Value is the bare number):\n" +
		"  grpcurl -plaintext " + addr + " list\n" +
		"  grpcurl -plaintext " + addr + " describe " + serviceName + "\n" +
		"  grpcurl -plaintext -H 'x-tenant: acme' -d 200 " + addr + " " + build + "\n" +
		"  grpcurl -plaintext -H 'x-tenant: acme' -d 3 " + addr + " " + follow + "\n" +
		"  # without reflection, from the repository root:\n" +
		fmt.Sprintf("  grpcurl -plaintext -import-path examples/grpc/proto -proto %s -H 'x-tenant: acme' -d 200 %s %s\n", reportProtoFile, addr, build)
}
