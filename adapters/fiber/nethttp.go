package resiliencefiber

import (
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
)

// HTTPHandler mounts a net/http handler in a fiber app, as fiber's
// adaptor.HTTPHandler does, but with c.UserContext() as the request's
// context, so the handler sees the middleware's deadline. (The adaptor
// gives it fasthttp's RequestCtx, which ends only when the server shuts
// down.) The response is buffered: fasthttp sends it when the handler
// returns, and Flush does nothing.
func HTTPHandler(h http.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ctx := c.UserContext()
		return adaptor.HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(ctx))
		}))(c)
	}
}
