// Command overload is a load lab: it offers more traffic than a simulated
// service can take, over loopback, once per limiter configuration (mode),
// and shows what the clients got. No external service is needed.
//
//	go run ./examples/overload                      # overload scenario, about a minute and a half
//	go run ./examples/overload -scenario priority   # or step, cpu, retry-storm, fair, fair-closed
//	go run ./examples/overload -modes all -rate 1000 -json out.json
//	go run ./examples/overload -scenario soak       # 10 minutes of abuse; see package soak
//	go run ./examples/overload -scenario rollout    # shadow, half, enforced; see package rollout
//
// While it runs, a progress line on stderr shows the mode, the elapsed
// time and the requests sent, answered in time, shed and timed out. At the
// end it prints one row per mode (goodput, latency of answered and shed
// requests, client timeouts, wasted work, and the generator's own lag),
// the per-class and per-window tables when the scenario has them, and the
// path of an SVG chart of goodput and p99 latency over time.
//
// Scenarios (-scenario): overload, 800 req/s against 100 slots × 200 ms
// (500 req/s) for 20 s; priority, 1000 req/s with 30 % high priority;
// step, 600 req/s while the slots go 100 → 50 at 10 s → 100 at 20 s;
// cpu, 1.6 × the measured capacity of CPU-bound work (about 2 ms of
// SHA-256 per request) served by a child process, which on Linux with two
// CPUs or more runs (and measures its capacity) on CPUs of its own while
// the generator keeps the first (-pin=false shares them; the header line
// says which); retry-storm, 1.6 × capacity for 20 s then 0.8 × for 20 s
// with clients that retry up to 3 times, its modes SERVER-CLIENT (see
// lab.StormModes); fair, one tenant offering 600 req/s and nine offering
// 44 req/s each (X-Tenant header) against the overload scenario's 500
// req/s, with a per-tenant table (-rate scales every tenant alike);
// fair-closed, the fair scenario with closed-loop clients: 20 slots × 200
// ms behind a limit of 20, a noisy tenant of 60 workers and nine quiet
// tenants of one worker each, every worker sending its next request as
// soon as the last is answered and re-sending at once after a 503. Every
// other flag overrides the scenario's value; -h lists them.
//
// -workers N makes any scenario but retry-storm closed-loop: N workers
// instead of -rate's arrivals (split between tenants by their rates), and
// -resend retry-after makes them wait a 503's Retry-After before they
// send again (default now).
//
// -protocol grpc drives the overload scenario over gRPC instead: the slot
// service on grpc-go behind the gRPC adapter, in this process, loaded by
// grpc-go clients (grpc.go).
//
// Modes (-modes, comma-separated, or all): none, fixed, fixed-codel,
// fixed-droplow, adaptive, adaptive-codel, fixed-retrylast, and the fair
// modes (a flow per tenant) fixed-fair, fixed-codel-fair, adaptive-fair,
// adaptive-codel-fair with adaptive-queue, their FIFO contrast; see the
// lab package's Ours.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ylcnfrht/resilience/examples/overload/lab"
	"github.com/ylcnfrht/resilience/examples/overload/rollout"
	"github.com/ylcnfrht/resilience/examples/overload/soak"
)

func main() {
	lab.ServeChildIfAsked(lab.Ours()) // the cpu scenario's service is this binary again
	soak.ServeChildIfAsked()          // and so is the soak's server
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	program := run
	if soak.Asked(os.Args[1:]) {
		program = soak.Run // its own flags: minutes long, one server
	}
	if rollout.Asked(os.Args[1:]) {
		program = rollout.Run // its own flags: shadow, half, enforced
	}
	code := program(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
