package main

import (
	"net/http"

	"github.com/labstack/echo/v4"

	resilienceecho "github.com/ylcnfrht/resilience/adapters/echo"
	"github.com/ylcnfrht/resilience/core/inbound"
)

func init() {
	register("echo", func(cfg config) (http.Handler, *inbound.Middleware, error) {
		mw, err := resilienceecho.New(inboundOptions(cfg))
		if err != nil {
			return nil, nil, asFlagError(err)
		}
		return echoRoutes(mw), mw.Inbound(), nil
	})
}

// echoRoutes mounts the routes on an echo engine: the two diagnostic
// routes outside the middleware, the work routes in a group behind it.
func echoRoutes(mw *resilienceecho.Middleware) http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/healthz", echo.WrapHandler(http.HandlerFunc(healthz)))
	e.GET("/debug/limits", echo.WrapHandler(limitsHandler(mw.Inbound())))
	g := e.Group("", mw.Handler)
	g.GET("/work", echo.WrapHandler(http.HandlerFunc(workHandler)))
	g.GET("/cooperative", echo.WrapHandler(http.HandlerFunc(cooperativeHandler)))
	g.GET("/export", echo.WrapHandler(http.HandlerFunc(exportHandler)))
	// Served directly: over HTTP/2 (h2c here) the middleware ends a 504's
	// stream cleanly by itself.
	return e
}
