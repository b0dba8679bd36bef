module github.com/ylcnfrht/resilience/core

go 1.26.0

require (
	go.uber.org/goleak v1.3.0
	pgregory.net/rapid v1.3.0
)

require github.com/stretchr/testify v1.11.1 // indirect
