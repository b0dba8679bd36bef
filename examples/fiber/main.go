// Command fiber is the reference setup of the fiber adapter: a fiber app
// with fiber's recover middleware, a health route and the live limits
// outside the inbound middleware, the middleware in front of each work
// route (so priority and key functions see the route pattern), a
// per-client rate limit, priorities from a header, and the 504 sent at
// the deadline through ServeOnTime.
//
//	go run ./examples/fiber
//
// The first line on stdout is "listening on http://HOST:PORT" (the default
// -addr 127.0.0.1:0 picks a free port). SIGINT or SIGTERM shuts it down:
// running requests get up to 5 s to finish.
//
// Routes: /healthz; /debug/limits (JSON: limit, inflight, queued, late,
// lateTotal); /orders/:id, which takes ?ms=N milliseconds (default 50)
// and stops when its context ends; /report, which takes ?ms=N ignoring its
// context, as a dependency that keeps going would. The timeout is 1 s, so
// /report?ms=3000 gets its 504 after 1 s while it runs on, holding its
// permit. A request's X-Priority header (an integer, lower is more
// important; missing means 5) orders the queue.
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"

	resiliencefiber "github.com/ylcnfrht/resilience/adapters/fiber"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// shutdownGrace bounds how long a shutdown waits for running requests.
const shutdownGrace = 5 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options is the reference configuration.
func options() inbound.Options {
	return inbound.Options{
		Timeout: time.Second,
		Concurrency: &resilience.ConcurrencyLimiterOptions{
			PermitLimit:  50,
			QueueLimit:   50,
			QueueTimeout: 500 * time.Millisecond,
			Overflow:     resilience.OverflowDropLowestPriority,
			Priority:     priority,
		},
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 100, Window: time.Second, Key: by.ClientIP}, // per client IP
	}
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

// appConfig is the app's fasthttp settings. fasthttp's read buffer is
// also its limit on the request line and header (431 past it): fiber's
// default 4 KB refuses what net/http (1 MB) takes, so it is 256 KB here,
// released while a connection is idle (ReduceMemoryUsage). Not 1 MB:
// fasthttp allocates the whole buffer for every connection with a request
// under way, a trickling client's too, so 1,000 slowloris connections hold
// 1 GB of heap at 1 MB (254 MB at 256 KB), counted by the GC and
// GOMEMLIMIT. adapters/fiber/README.md has the figures.
func appConfig() fiber.Config {
	return fiber.Config{
		DisableStartupMessage: true,
		ReadTimeout:           30 * time.Second, // the whole request, body included (not the handler)
		IdleTimeout:           60 * time.Second, // idle keep-alive connections are closed
		ReadBufferSize:        256 << 10,
		ReduceMemoryUsage:     true,
	}
}

// newApp builds the app around mw.
func newApp(mw *resiliencefiber.Middleware, cfg fiber.Config) *fiber.App {
	app := fiber.New(cfg)
	app.Use(recover.New())
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendString("ok") })
	app.Get("/debug/limits", func(c *fiber.Ctx) error { return c.JSON(mw.Stats()) })
	app.Get("/orders/:id", mw.Handler, func(c *fiber.Ctx) error {
		select {
		case <-time.After(duration(c)):
		case <-c.UserContext().Done():
			return c.UserContext().Err() // the 504 is the middleware's
		}
		return c.SendString("order " + c.Params("id") + "\n")
	})
	app.Get("/report", mw.Handler, func(c *fiber.Ctx) error {
		time.Sleep(duration(c)) // ignores its context
		return c.SendString("report\n")
	})
	resiliencefiber.ServeOnTime(app)
	return app
}

// duration reads ?ms=N, at most a minute.
func duration(c *fiber.Ctx) time.Duration {
	ms := min(max(c.QueryInt("ms", 50), 0), 60_000)
	return time.Duration(ms) * time.Millisecond
}

// run parses args, listens, prints where, and serves until ctx is done.
// It returns the exit code: 0 after a clean shutdown (or -h), 2 for
// invalid flags, 1 for any other failure.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fiber", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	mw, err := resiliencefiber.New(options())
	if err != nil {
		fmt.Fprintln(stderr, "fiber:", err)
		return 1
	}
	app := newApp(mw, appConfig())
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "fiber: -addr:", err)
		return 1
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln) }()
	select {
	case err := <-served:
		fmt.Fprintln(stderr, "fiber:", err)
		return 1
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "shutting down")
	code := 0
	if err := app.ShutdownWithTimeout(shutdownGrace); err != nil {
		fmt.Fprintln(stderr, "fiber: shutdown:", err)
		code = 1
	}
	if err := <-served; err != nil {
		fmt.Fprintln(stderr, "fiber:", err)
		code = 1
	}
	return code
}
