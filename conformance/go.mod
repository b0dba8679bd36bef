module github.com/ylcnfrht/resilience/conformance

go 1.26

require github.com/ylcnfrht/resilience/core v0.0.0-00010101000000-000000000000

require go.uber.org/goleak v1.3.0

replace github.com/ylcnfrht/resilience/core => ../core
