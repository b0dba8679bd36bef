// Command echo is an echo service behind resilience's inbound middleware, in
// the reference setup: the health route before the middleware (never
// shed), then a 5 s timeout, 200 handlers at once and a queue of 100 that
// waits at most 500 ms.
//
//	go run ./examples/echo -addr 127.0.0.1:8080
//
// The first line on stdout is "listening on http://HOST:PORT" (the default
// -addr 127.0.0.1:0 picks a free port). SIGINT or SIGTERM shuts it down,
// giving running requests up to 5 s.
//
// Routes: /healthz; /orders/:id, which answers after ?ms=N milliseconds
// (default 10) or when its context ends, so /orders/1?ms=6000 gets a 504
// at 5 s. A request's X-Priority header (0 first … 9 last; 5 without it)
// decides who waits least when requests queue: the priority function
// reads it from the echo.Context.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	resilienceecho "github.com/ylcnfrht/resilience/adapters/echo"
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
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
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

// newService is the echo engine with the middleware in the reference setup,
// and the inbound middleware under it (to drain at shutdown).
func newService() (http.Handler, *inbound.Middleware, error) {
	mw, err := resilienceecho.New(inbound.Options{
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
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Use(middleware.Recover())
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok") }) // outside the group: never shed
	api := e.Group("", mw.Handler)
	api.GET("/orders/:id", order)
	// Served directly: the middleware ends an HTTP/2 request's 504 stream
	// cleanly by itself while a late handler runs on.
	return e, mw.Inbound(), nil
}

// priority ranks a queued request by its X-Priority header, read through
// the neutral request view: 0 to 9, anything else (missing, malformed, out
// of range) 5, so a client cannot put itself ahead of every other.
var priority = func() func(context.Context) int {
	f, err := by.Priority(by.PriorityHeader{Name: "X-Priority", Min: 0, Max: 9, Default: 5})
	if err != nil {
		panic(err) // constant options: a programming error
	}
	return f
}()

// order simulates work of ?ms=N milliseconds that stops when its context
// (c.Request().Context(), which carries the deadline) ends.
func order(c echo.Context) error {
	ms, err := strconv.Atoi(c.QueryParam("ms"))
	if c.QueryParam("ms") == "" {
		ms, err = 10, nil
	}
	if err != nil || ms < 0 || ms > 60_000 {
		return c.JSON(http.StatusBadRequest, map[string]string{"error": "ms must be an integer from 0 to 60000"})
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return c.JSON(http.StatusOK, map[string]string{"order": c.Param("id")})
	case <-c.Request().Context().Done():
		return nil // the middleware has answered 504 (or the client left)
	}
}
