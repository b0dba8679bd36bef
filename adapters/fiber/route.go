package resiliencefiber

import (
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"sync/atomic"

	"github.com/gofiber/fiber/v2"
)

// routes knows which of an app's routes are endpoints (app.Get, app.All,
// …) rather than middleware prefixes (app.Use, Group), which fiber does
// not say on the Route the middleware sees, and the endpoints' patterns in
// the neutral format. It is rebuilt when routes are added.
type routes struct {
	app      *fiber.App
	handlers uint32 // app.HandlersCount() when built
	patterns map[routeKey]string
}

// routeKey identifies a registered route: fiber's Route values are copies,
// but they share the route's handler slice.
type routeKey struct {
	method string
	first  *fiber.Handler
}

func keyOf(r *fiber.Route) (routeKey, bool) {
	if len(r.Handlers) == 0 {
		return routeKey{}, false
	}
	return routeKey{r.Method, &r.Handlers[0]}, true
}

// route returns the pattern of the route the middleware runs in, in the
// neutral format ("/users/{id}"), or "" when it runs as app.Use or Group
// middleware: fiber chooses the endpoint only when the chain reaches it.
func (m *Middleware) route(c *fiber.Ctx) string {
	k, ok := keyOf(c.Route())
	if !ok {
		return ""
	}
	app := c.App()
	t := m.routes.Load()
	if t == nil || t.app != app || t.handlers != app.HandlersCount() {
		t = buildRoutes(app)
		m.routes.Store(t)
	}
	return t.patterns[k]
}

func buildRoutes(app *fiber.App) *routes {
	t := &routes{app: app, handlers: app.HandlersCount(), patterns: map[routeKey]string{}}
	for _, r := range app.GetRoutes(true) { // true: without middleware routes
		if k, ok := keyOf(&r); ok {
			t.patterns[k] = adapt.FiberRoute(r.Path)
		}
	}
	return t
}

// routeCache is the field a Middleware keeps its route table in.
type routeCache = atomic.Pointer[routes]
