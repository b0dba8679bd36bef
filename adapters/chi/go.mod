module github.com/ylcnfrht/resilience/adapters/chi

go 1.26.0

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/ylcnfrht/resilience/conformance v0.1.0
	github.com/ylcnfrht/resilience/core v0.1.0
	go.uber.org/goleak v1.3.0
)

replace (
	github.com/ylcnfrht/resilience/conformance => ../../conformance
	github.com/ylcnfrht/resilience/core => ../../core
)
