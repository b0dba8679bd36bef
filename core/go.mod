module github.com/ylcnfrht/resilience/core

go 1.26
