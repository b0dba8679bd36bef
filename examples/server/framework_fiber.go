package main

import (
	"context"
	"github.com/ylcnfrht/resilience/core/inbound/ready"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"

	resiliencefiber "github.com/ylcnfrht/resilience/adapters/fiber"
	"github.com/ylcnfrht/resilience/core/inbound"
)

func init() { registerServer("fiber", fiberServer) }

// fiberServer serves the routes with fiber on its own (fasthttp) server:
// the diagnostic routes first, outside the middleware; the middleware in
// front of each work route, so its route pattern is known; the 504 sent at
// the deadline through ServeOnTime. The handlers are the net/http ones,
// mounted so that they see the middleware's deadline.
func fiberServer(cfg config, _ io.Writer) (server, *inbound.Middleware, error) {
	mw, err := resiliencefiber.New(inboundOptions(cfg))
	if err != nil {
		return nil, nil, asFlagError(err)
	}
	app := fiber.New(fiber.Config{
		DisableStartupMessage: true,
		// As the net/http server's: a client trickling its request, or
		// an idle keep-alive connection, cannot hold a connection.
		ReadTimeout: 30 * time.Second,
		IdleTimeout: 60 * time.Second,
		// fasthttp's read buffer is its limit on the request line and
		// header: 256 KB takes the large headers and queries the net/http
		// servers take (fiber's 4 KB default answers them 431), released
		// while a connection is idle. Not net/http's 1 MB: the buffer is
		// allocated whole for each connection with a request under way
		// (adapters/fiber/README.md has the figures).
		ReadBufferSize:    256 << 10,
		ReduceMemoryUsage: true,
	})
	app.Use(recover.New())
	// GET only, as chi's r.Get (fiber's app.Get would add HEAD).
	app.Add(http.MethodGet, "/healthz", resiliencefiber.HTTPHandler(http.HandlerFunc(healthz)))
	app.Add(http.MethodGet, "/debug/limits", resiliencefiber.HTTPHandler(limitsHandler(mw.Inbound())))
	app.Add(http.MethodGet, "/work", mw.Handler, resiliencefiber.HTTPHandler(http.HandlerFunc(workHandler)))
	app.Add(http.MethodGet, "/cooperative", mw.Handler, resiliencefiber.HTTPHandler(http.HandlerFunc(cooperativeHandler)))
	app.Add(http.MethodGet, "/export", mw.Handler, resiliencefiber.HTTPHandler(http.HandlerFunc(exportHandler)))
	resiliencefiber.ServeOnTime(app)
	return fiberApp{app}, mw.Inbound(), nil
}

// fiberApp is a fiber app as a server.
type fiberApp struct{ app *fiber.App }

func (f fiberApp) Serve(ln net.Listener) error { return f.app.Listener(ln) }

// routeReadiness serves ready at /readyz, outside the middleware, as the
// net/http frameworks' servers do.
func (f fiberApp) routeReadiness(ready *ready.Probe) {
	f.app.Add(http.MethodGet, "/readyz", resiliencefiber.HTTPHandler(ready))
}

func (f fiberApp) Shutdown(ctx context.Context) error { return f.app.ShutdownWithContext(ctx) }

// Close gives up waiting for running requests: fasthttp cannot cut them
// off, so they finish on their own (at most maxWorkMS).
func (f fiberApp) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return f.app.ShutdownWithContext(ctx)
}
