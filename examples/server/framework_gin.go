package main

import (
	"net/http"

	"github.com/gin-gonic/gin"

	resiliencegin "github.com/ylcnfrht/resilience/adapters/gin"
	"github.com/ylcnfrht/resilience/core/inbound"
)

func init() {
	register("gin", func(cfg config) (http.Handler, *inbound.Middleware, error) {
		mw, err := resiliencegin.New(inboundOptions(cfg))
		if err != nil {
			return nil, nil, asFlagError(err)
		}
		return ginRoutes(mw), mw.Inbound(), nil
	})
}

// ginRoutes mounts the routes on a gin engine: the two diagnostic routes
// before the middleware, the work routes in a group behind it.
func ginRoutes(mw *resiliencegin.Middleware) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/healthz", gin.WrapF(healthz))
	r.GET("/debug/limits", gin.WrapH(limitsHandler(mw.Inbound())))
	g := r.Group("/", mw.Handler)
	g.GET("/work", gin.WrapF(workHandler))
	g.GET("/cooperative", gin.WrapF(cooperativeHandler))
	g.GET("/export", gin.WrapF(exportHandler))
	// Served directly: over HTTP/2 (h2c here) the middleware ends a 504's
	// stream cleanly by itself.
	return r
}
