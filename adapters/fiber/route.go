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
			t.patterns[k] = fiberRoute(r.Path)
		}
	}
	return t
}

// routeCache is the field a Middleware keeps its route table in.
type routeCache = atomic.Pointer[routes]

// fiberRoute converts a fiber route path to the neutral format, following
// fiber's own syntax (its path parser): a parameter starts with ':'
// anywhere in a segment and its name ends at '/', '-', '.', ':', '?' or
// '<', so "/flights/:from-:to" is "/flights/{from}-{to}"; a constraint
// ("<int>") and the optional mark ("?") are dropped; "::name" is a literal
// ':' before the parameter; each greedy parameter ("*", "+") becomes "*";
// a character escaped with '\\' is kept literally, without the backslash.
func fiberRoute(p string) string {
	if !strings.ContainsAny(p, ":*+\\") {
		return p
	}
	var b strings.Builder
	b.Grow(len(p) + 4)
	for i := 0; i < len(p); {
		switch c := p[i]; {
		case c == '\\' && i+1 < len(p):
			b.WriteByte(p[i+1])
			i += 2
		case c == ':' && i+1 < len(p) && p[i+1] == ':':
			b.WriteByte(':') // the parameter starts at the second ':'
			i++
		case c == ':':
			j := i + 1
			for j < len(p) && !strings.ContainsRune("/-.:?<\\", rune(p[j])) {
				j++
			}
			if j == i+1 && (j == len(p) || p[j] != '<') {
				b.WriteByte(':') // no name: fiber would not give it one either
				i++
				continue
			}
			b.WriteString("{" + p[i+1:j] + "}")
			if j < len(p) && p[j] == '<' {
				j = constraintEnd(p, j)
			}
			if j < len(p) && p[j] == '?' {
				j++
			}
			i = j
		case c == '*' || c == '+':
			b.WriteByte('*')
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// constraintEnd returns the index after the '>' that closes the constraint
// starting at p[i] == '<', skipping what its parenthesised data holds
// ("<regex(a>b)>"); len(p) if it is not closed.
func constraintEnd(p string, i int) int {
	depth := 0
	for ; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			depth--
		case '>':
			if depth <= 0 {
				return i + 1
			}
		}
	}
	return len(p)
}
