// Command overload runs every scenario of the overload lab for the
// project's modes and the other libraries' middleware, one after another,
// with one set of knobs (limit 100, queue 100, queue timeout 500 ms where
// the option exists), and prints each scenario's tables in Markdown for
// BENCHMARKS.md:
//
//	go run ./bench/overload                          # every scenario, about 20 minutes
//	go run ./bench/overload -scenarios overload -contenders fixed,chi-throttle
//
// It is a program, not a test, so that `go test` of the workspace stays
// fast. The charts and the JSON of each scenario go to -out.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ylcnfrht/resilience/examples/overload/lab"
)

// contenders are the project's modes, then the peers.
func contenders() []lab.Contender { return append(lab.Ours(), peers()...) }

func main() {
	lab.ServeChildIfAsked(contenders()) // the cpu scenario's service is this binary again
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
