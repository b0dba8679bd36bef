// Command connect is a connect-go service behind the resilience connect
// adapter: one concurrency limit with a priority queue, a per-tenant rate
// limit and a timeout for its Connect, gRPC and gRPC-Web clients, unary
// and streaming calls alike, with rejections as errors in each caller's
// protocol.
//
//	go run ./examples/connect
//
// The first line on stdout is "listening on http://HOST:PORT" (the default
// -addr 127.0.0.1:0 picks a free port). The server speaks HTTP/1.1 and
// cleartext HTTP/2, which gRPC clients need. SIGINT or SIGTERM shuts it
// down: queued calls and new arrivals are refused Unavailable (reason
// shutting-down) at once, and running calls get up to 5 s to finish.
//
// Procedures (google.protobuf well-known types, so no generated code):
//
//   - /example.v1.ReportService/Build (unary, Int64Value ms → StringValue)
//     builds a report for ms milliseconds, stopping if its context ends.
//   - /example.v1.ReportService/Follow (server stream, Int64Value n →
//     StringValue) sends n progress messages, 100 ms apart.
//
// Calls carry an X-Tenant header; each tenant may start -rate calls a
// second. Streams rank below unary calls when they must queue (the
// priority function reads the call's connect.Spec). /healthz and
// /debug/limits are outside the middleware.
//
//	curl -s -H 'Content-Type: application/json' -H 'X-Tenant: acme' -d 200 http://HOST/example.v1.ReportService/Build
//	grpcurl is not needed: any connect, gRPC or gRPC-Web client works.
package main

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

// shutdownGrace bounds how long a shutdown waits for running calls.
const shutdownGrace = 5 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program: parse args, listen, print where, serve until
// ctx is done, then shut down. It returns the exit code: 0 after a clean
// shutdown (or -h), 2 for invalid flags, 1 for any other failure.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	var cfg config
	fs.IntVar(&cfg.permits, "permit-limit", 50, "calls running at once")
	fs.IntVar(&cfg.queue, "queue-limit", 25, "calls waiting for a permit")
	fs.DurationVar(&cfg.queueTimeout, "queue-timeout", 500*time.Millisecond, "longest a call waits for a permit")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Second, "longest a call may run (a caller's earlier deadline wins)")
	fs.IntVar(&cfg.rate, "rate", 100, "calls a tenant may start per second")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	handler, mw, err := newServer(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "connect:", err)
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "connect: -addr: cannot listen: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	// No ReadTimeout: it would cut off long client and bidi streams.
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second,
		Protocols: protocols, ErrorLog: log.New(stderr, "connect: http: ", 0)}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		fmt.Fprintln(stderr, "connect:", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// Drain first: queued calls and new arrivals are refused Unavailable
	// (shutting-down) at once; then Shutdown waits for the running ones.
	if err := mw.Inbound().Drain(sctx); err != nil {
		fmt.Fprintln(stderr, "connect:", err)
	}
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	<-serveErr
	return 0
}
