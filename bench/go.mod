module github.com/ylcnfrht/resilience/bench

go 1.26

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/go-chi/chi/v5 v5.5.0
	github.com/ylcnfrht/resilience/core v0.1.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
)

replace github.com/ylcnfrht/resilience/core => ../core
