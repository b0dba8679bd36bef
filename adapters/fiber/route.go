package resiliencefiber

import (
	"strings"
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
			t.patterns[k] = colonRoute(r.Path)
		}
	}
	return t
}

// routeCache is the field a Middleware keeps its route table in.
type routeCache = atomic.Pointer[routes]

// colonRoute converts fiber's route syntax to the neutral one: ":name"
// (with fiber's "?" and "<constraint>") becomes "{name}", a wildcard
// ("*", "+") becomes "*".
func colonRoute(p string) string {
	if !strings.ContainsAny(p, ":*+") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c == ':' && (i == 0 || p[i-1] == '/'):
			j := i + 1
			for j < len(p) && p[j] != '/' && p[j] != '<' && p[j] != '?' && p[j] != '.' && p[j] != '-' {
				j++
			}
			b.WriteString("{" + p[i+1:j] + "}")
			if j < len(p) && p[j] == '<' {
				if k := strings.IndexByte(p[j:], '>'); k >= 0 {
					j += k + 1
				}
			}
			if j < len(p) && p[j] == '?' {
				j++
			}
			i = j
		case (c == '*' || c == '+') && (i == 0 || p[i-1] == '/'):
			b.WriteByte('*')
			for i++; i < len(p) && p[i] != '/'; i++ {
			}
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}
