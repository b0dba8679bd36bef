package adapt

import (
	"net/http"

	"github.com/ylcnfrht/resilience/core/internal/route"
)

// PatternRoute is the default RouteFunc: the Pattern of raw, an
// *http.Request routed by http.ServeMux (or a router that sets Pattern),
// converted to Request.Route's format: "GET example.com/files/{path...}"
// becomes "/files/*". It returns "" for anything else.
func PatternRoute(raw any) string {
	r, ok := raw.(*http.Request)
	if !ok {
		return ""
	}
	return route.Mux(r.Pattern)
}

// ColonRoute converts a route pattern in the colon style of gin, echo and
// fiber to Request.Route's format: ":name" (and fiber's ":name?",
// ":name<constraint>" and "/:from-:to") becomes "{name}", and a wildcard
// ("*", "*name", fiber's "+") becomes "*". "/users/:id" gives
// "/users/{id}" and "/files/*filepath" gives "/files/*". A pattern with
// neither is returned unchanged.
func ColonRoute(pattern string) string { return route.Colon(pattern) }

// BraceRoute converts a pattern in the brace style of chi (and
// http.ServeMux's path) to Request.Route's format: a parameter's regular
// expression is dropped, "/users/{id:[0-9]+}" giving "/users/{id}". A
// pattern without one is returned unchanged, without allocating.
func BraceRoute(pattern string) string { return route.Brace(pattern) }

// FiberRoute converts a fiber route path to Request.Route's format,
// following fiber's own syntax: a parameter starts with ':' anywhere in a
// segment and its name ends at '/', '-', '.', ':', '?' or '<', so
// "/flights/:from-:to" is "/flights/{from}-{to}"; a constraint ("<int>")
// and the optional mark ("?") are dropped; "::name" is a literal ':'
// before the parameter; each greedy parameter ("*", "+") becomes "*"; a
// character escaped with '\\' is kept literally, without the backslash.
func FiberRoute(pattern string) string { return route.Fiber(pattern) }
