package main

import "strings"

// connectTrySummary is, with -framework connect, the banner's lines for
// the work service's RPCs, which connect serves beside the HTTP routes:
// a Connect call with curl, and a gRPC call with grpcurl from the shipped
// .proto (connect registers no reflection), from the repository root.
func connectTrySummary(cfg config, base string) string {
	if cfg.framework != "connect" {
		return ""
	}
	addr := strings.TrimPrefix(base, "http://")
	return "  # the same work as RPCs (Connect, gRPC, gRPC-Web; proto: examples/server/proto/" + workProtoFile + "):\n" +
		"  curl -s -H 'Content-Type: application/json' -d 200 " + base + workProcedure + "\n" +
		"  grpcurl -plaintext -import-path examples/server/proto -proto " + workProtoFile + " -d 200 " + addr + " " + workProcedure[1:] + "\n"
}
