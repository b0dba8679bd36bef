module github.com/ylcnfrht/resilience/adapters/connect

go 1.26.0

require (
	connectrpc.com/connect v1.21.1
	github.com/ylcnfrht/resilience/conformance v0.1.0
	github.com/ylcnfrht/resilience/core v0.1.0
	go.uber.org/goleak v1.3.0
	google.golang.org/protobuf v1.36.11
)

replace (
	github.com/ylcnfrht/resilience/conformance => ../../conformance
	github.com/ylcnfrht/resilience/core => ../../core
)
