// Command gin is a gin service behind resilience's inbound middleware, in
// the reference setup: the health route before the middleware (never
// shed), then a 5 s timeout, 200 handlers at once and a queue of 100 that
// waits at most 500 ms.
//
//	go run ./examples/gin -addr 127.0.0.1:8080
//
// The first line on stdout is "listening on http://HOST:PORT" (the default
// -addr 127.0.0.1:0 picks a free port). SIGINT or SIGTERM shuts it down,
// giving running requests up to 5 s.
//
// Routes: /healthz; /orders/:id, which answers after ?ms=N milliseconds
// (default 10) or when its context ends, so /orders/1?ms=6000 gets a 504
// at 5 s. A request's X-Priority header (0 first … 9 last; 5 without it)
// decides who waits least when requests queue: the priority function
// reads it from the *gin.Context (anything else ranks 5).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"

	resiliencegin "github.com/ylcnfrht/resilience/adapters/gin"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args, serves until ctx ends and returns the exit code: 0 after
// a clean shutdown, 2 for invalid flags, 1 for any other failure.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (port 0 picks a free port)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	h, mw, err := newService()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second, // the whole request, body included (not the handler)
		IdleTimeout:       60 * time.Second, // idle keep-alive connections are closed
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		fmt.Fprintln(stderr, err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Drain first: queued requests and new arrivals get 503 shutting-down
	// at once; then Shutdown waits for the running ones.
	if err := mw.Drain(sctx); err != nil {
		fmt.Fprintln(stderr, err)
	}
	if err := srv.Shutdown(sctx); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// newService is the gin engine with the middleware in the reference setup,
// and the inbound middleware under it (to drain at shutdown).
func newService() (http.Handler, *inbound.Middleware, error) {
	mw, err := resiliencegin.New(inbound.Options{
		Timeout: 5 * time.Second,
		Concurrency: &resilience.ConcurrencyLimiterOptions{
			PermitLimit:  200,
			QueueLimit:   100,
			QueueTimeout: 500 * time.Millisecond,
			Priority:     priority,
		},
	})
	if err != nil {
		return nil, nil, err // a *resilience.ConfigError naming the field
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok") }) // before Use: never shed
	r.Use(mw.Handler)
	r.GET("/orders/:id", order)
	// Served directly: over HTTP/2 the middleware ends a 504's stream
	// cleanly by itself while a late handler runs on.
	return r, mw.Inbound(), nil
}

// priority ranks a request that must queue by its X-Priority header.
func priority(ctx context.Context) int {
	c, ok := resiliencegin.Context(ctx)
	if !ok {
		return 5
	}
	p, err := strconv.Atoi(c.GetHeader("X-Priority"))
	if err != nil || p < 0 || p > 9 {
		return 5 // missing, malformed or out of range: a client cannot jump the queue
	}
	return p
}

// order simulates work of ?ms=N milliseconds that stops when its context
// (c.Request.Context(), which carries the deadline) ends.
func order(c *gin.Context) {
	ms, err := strconv.Atoi(c.DefaultQuery("ms", "10"))
	if err != nil || ms < 0 || ms > 60_000 {
		c.JSON(http.StatusBadRequest, gin.H{"error": "ms must be an integer from 0 to 60000"})
		return
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		c.JSON(http.StatusOK, gin.H{"order": c.Param("id")})
	case <-c.Request.Context().Done():
		// The middleware has answered 504 (or the client left).
	}
}
