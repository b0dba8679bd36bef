// Command metrics is a service whose resilience telemetry is exported as
// OpenTelemetry metrics and served to Prometheus on /metrics, with
// alerting rules (alerts.yml, written by go generate from
// promrules.DefaultConfig, unit-tested by alerts_test.yml with promtool
// test rules, each rule's runbook a section of docs/runbook.md) for the
// signals worth acting on: a high share of requests shed or timed out, by
// service and on one instance, a rate-limit store failing closed or open,
// handlers running past their deadline, an adaptive limit stuck at its
// floor, metrics gone; and a Grafana dashboard for a fleet
// (dashboard.json: job, namespace, instance and middleware variables;
// goodput, shed by reason, queue wait, limit against in flight, late
// handlers, rate limited, store errors). The rules and the dashboard name
// no limiter and no threshold of this service.
//
//	go run ./examples/metrics
//
// The first line on stdout is "listening on http://HOST:PORT" (the default
// -addr 127.0.0.1:0 picks a free port). SIGINT or SIGTERM shuts it down.
//
// Routes: /work answers after -work (or ?ms=N; with ?ignore-deadline=1 it
// does not watch its context, so it runs late past the timeout), inside
// the inbound middleware (600 requests a minute per client, an adaptive concurrency
// limit with a short queue, a -timeout budget); /metrics is the Prometheus
// exposition; /debug/limits the middleware's live numbers as JSON.
//
// It is a module of its own: the Prometheus exporter and, for the rules'
// test, Prometheus's rule parser are heavy dependencies no other example
// needs.
package main

//go:generate go run github.com/ylcnfrht/resilience/extensions/otel/cmd/resilience-alerts -o alerts.yml

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// shutdownGrace bounds how long a shutdown waits for running requests.
const shutdownGrace = 5 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program. It returns the exit code: 0 after a clean
// shutdown (or -h), 2 for invalid flags, 1 for any other failure.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("metrics", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	timeout := fs.Duration("timeout", 2*time.Second, "budget of each /work request")
	work := fs.Duration("work", 20*time.Millisecond, "how long /work takes")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *timeout <= 0 || *work < 0 {
		fmt.Fprintln(stderr, "metrics: -timeout must be positive and -work not negative")
		return 2
	}
	svc, err := newService(*timeout, *work)
	if err != nil {
		fmt.Fprintln(stderr, "metrics:", err)
		return 2
	}
	defer svc.close(context.Background())
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "metrics: -addr: cannot listen: %v\n", err)
		return 1
	}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "listening on %s\n", url)
	fmt.Fprintf(stdout, "try: curl %s/work; curl %s/metrics\n", url, url)

	srv := &http.Server{
		Handler:           svc.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second, // the whole request, body included (not the handler)
		IdleTimeout:       60 * time.Second, // idle keep-alive connections are closed
		ErrorLog:          log.New(stderr, "metrics: http: ", 0),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		fmt.Fprintln(stderr, "metrics:", err)
		return 1
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	code := 0
	if err := srv.Shutdown(sctx); err != nil {
		fmt.Fprintln(stderr, "metrics: shutdown:", err)
		srv.Close()
		code = 1
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "metrics:", err)
		code = 1
	}
	return code
}
