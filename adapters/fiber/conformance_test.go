package resiliencefiber_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"

	resiliencefiber "github.com/ylcnfrht/resilience/adapters/fiber"
	"github.com/ylcnfrht/resilience/conformance"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// The capabilities fasthttp lacks, with the reasons users read in the
// package documentation.
const (
	disconnectMissing = "fasthttp does not watch the connection while a handler runs, so a client that leaves is not noticed " +
		"until the response is written"
	onTimeMissing = "without ServeOnTime, fasthttp sends a response only when fiber's handler returns, and fiber reuses its " +
		"Ctx then, so the middleware cannot answer while the handler runs on: the 504 comes when it returns"
	streamingMissing = "fasthttp sends the response when the handler returns; a net/http handler mounted through the adaptor " +
		"writes to a buffer and its Flush does nothing"
)

// routeMissing is why, with app.Use or a Group, key and priority
// functions see no route.
const routeMissing = "fiber chooses the endpoint only when the chain reaches it: middleware registered with app.Use or a Group " +
	"runs in a prefix route, so Route is \"\"; put the middleware in the route (app.Get(path, mw.Handler, h)) to know it"

// fiberHarness serves the suite the way a fiber user would: fiber's
// recover middleware first, the health route, then the middleware in
// front of every other route (in each route's handlers, or with app.Use
// when use is set), net/http handlers mounted with HTTPHandler, the 504
// on time through ServeOnTime unless onTime is false, on fiber's own
// listener.
func fiberHarness(name string, use, onTime bool) conformance.Harness {
	missing := map[conformance.Capability]string{
		conformance.CapDisconnect: disconnectMissing,
		conformance.CapStreaming:  streamingMissing,
		conformance.CapHTTP2:      "fasthttp speaks HTTP/1 only",
	}
	if use {
		missing[conformance.CapRoute] = routeMissing
	}
	if !onTime {
		missing[conformance.CapOnTime504] = onTimeMissing
	}
	return conformance.Harness{
		Name:    name,
		Missing: missing,
		Start: func(cfg conformance.Config) (*conformance.Server, error) {
			mw, err := resiliencefiber.New(cfg.Options)
			if err != nil {
				return nil, err
			}
			app := fiber.New(fiber.Config{DisableStartupMessage: true})
			app.Use(recover.New())
			app.Get(conformance.HealthPath, resiliencefiber.HTTPHandler(cfg.Health))
			h := resiliencefiber.HTTPHandler(cfg.Handler)
			if use {
				app.Use(mw.Handler)
				app.All("/route/:id", h) // conformance.RoutePattern
				app.All("/*", h)
			} else {
				app.All("/route/:id", mw.Handler, h)
				app.All("/*", mw.Handler, h)
			}
			if onTime {
				resiliencefiber.ServeOnTime(app)
			}
			return listen(app, mw.Stats)
		},
	}
}

// listen serves app with fiber's own server on a loopback listener.
func listen(app *fiber.App, stats func() inbound.Stats) (*conformance.Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	// fasthttp's worker pool checks for its stop only between sleeps of
	// MaxIdleWorkerDuration (10 s by default), so its cleaner outlives
	// Shutdown by up to that long; a short one lets goleak see it end.
	app.Server().MaxIdleWorkerDuration = 50 * time.Millisecond
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln) }()
	return &conformance.Server{
		URL:   "http://" + ln.Addr().String(),
		Stats: stats,
		Close: func() {
			_ = app.Shutdown()
			if err := <-served; err != nil && !errors.Is(err, net.ErrClosed) {
				panic(err)
			}
		},
	}, nil
}

// TestConformance: the fiber adapter behaves as the inbound table
// specifies, its missing capabilities pinned: with the 504 on time, the
// middleware in each route or with app.Use; and without ServeOnTime.
func TestConformance(t *testing.T) {
	conformance.Run(t, fiberHarness("fiber", false, true))
}

func TestConformanceUse(t *testing.T) {
	conformance.Run(t, fiberHarness("fiber (app.Use)", true, true))
}

// TestConformanceWithoutServeOnTime: the middleware alone, its 504 sent
// when the handler returns, pinned.
func TestConformanceWithoutServeOnTime(t *testing.T) {
	conformance.Run(t, fiberHarness("fiber (without ServeOnTime)", false, false))
}
