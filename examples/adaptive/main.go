// Command adaptive is a chi service whose concurrency limit is found at run
// time by resilience's adaptive limiter, with priorities in front: when the
// limiter must queue or shed, the least important traffic goes first.
//
//	go run ./examples/adaptive
//
// The first line on stdout is "listening on http://HOST:PORT" (the default
// -addr 127.0.0.1:0 picks a free port). SIGINT or SIGTERM shuts it down
// cleanly: running requests get up to 5 s to finish.
//
// Routes:
//
//   - /work simulates a service with room for -knee requests at once: it
//     answers in -base while at most that many run, and proportionally
//     slower beyond, so pushing more concurrency through it only adds
//     latency. It stops early if its context ends (the 5 s timeout or the
//     client leaving). Drive it above capacity and watch the limit settle
//     near the knee.
//   - /healthz and /debug/limits are registered before the middleware, so
//     they answer while the service sheds. /debug/limits serves the
//     limiter's live values (its Stats) as JSON:
//     {"limit":…,"inflight":…,"queued":…}.
//
// A request's X-Priority header (0 critical … 9 background; missing or
// malformed is 5) decides who waits less and who is shed first: the queue
// grants lower numbers first, and when it is full a newcomer evicts the
// newest waiter of a less important class (drop-lowest-priority).
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

// shutdownGrace bounds how long a shutdown waits for running requests.
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
	fs := flag.NewFlagSet("adaptive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	knee := fs.Int("knee", 50, "requests the simulated service runs at once before it slows down")
	base := fs.Duration("base", 50*time.Millisecond, "the simulated service's latency below the knee")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *knee < 1 || *base <= 0 || *base > time.Minute {
		fmt.Fprintln(stderr, "adaptive: -knee must be at least 1 and -base between 0 and 1m")
		return 2
	}
	handler, err := newService(*knee, *base)
	if err != nil {
		fmt.Fprintln(stderr, "adaptive:", err)
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "adaptive: -addr: cannot listen: %v\n", err)
		return 1
	}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "listening on %s\n", url)
	fmt.Fprintf(stdout, "simulated service: %v up to %d at once, slower beyond\n", *base, *knee)
	fmt.Fprintf(stdout, "try: curl -H 'X-Priority: 1' %s/work; curl %s/debug/limits\n", url, url)

	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		// ReadTimeout bounds reading a whole request, body included, so a
		// client that trickles its body cannot hold a connection; it does
		// not limit the handler (Options.Timeout does).
		ReadTimeout: 30 * time.Second,
		// IdleTimeout closes keep-alive connections that sit idle, so
		// idle clients do not pile up connections and goroutines.
		IdleTimeout: 60 * time.Second,
		ErrorLog:    log.New(stderr, "adaptive: http: ", 0),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		fmt.Fprintln(stderr, "adaptive:", err)
		return 1
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	code := 0
	if err := srv.Shutdown(sctx); err != nil {
		fmt.Fprintln(stderr, "adaptive: shutdown:", err)
		srv.Close()
		code = 1
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "adaptive:", err)
		code = 1
	}
	return code
}
