module github.com/ylcnfrht/resilience/bench

go 1.26

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/go-chi/chi/v5 v5.5.0
	github.com/ylcnfrht/resilience/core v0.1.0
	github.com/ylcnfrht/resilience/examples v0.1.0
	golang.org/x/sync v0.19.0
	golang.org/x/time v0.14.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
)

replace github.com/ylcnfrht/resilience/core => ../core

replace github.com/ylcnfrht/resilience/examples => ../examples

replace github.com/ylcnfrht/resilience/adapters/chi => ../adapters/chi

replace github.com/ylcnfrht/resilience/conformance => ../conformance
