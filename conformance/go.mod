module github.com/ylcnfrht/resilience/conformance

go 1.26.0

require github.com/ylcnfrht/resilience/core v0.1.0

require go.uber.org/goleak v1.3.0

replace github.com/ylcnfrht/resilience/core => ../core
