package inbound

import (
	"net/http"
	"strings"
)

// RouteFunc returns the route pattern a request matches, in Request.Route's
// format ("/users/{id}": no method, host or parameter constraint), or ""
// when none matches or it cannot be known yet. raw is Request.Raw: the framework's own request object. The
// middleware calls it at most once per request, and only when a priority
// or key function reads Request.Route. It must be safe for concurrent use.
type RouteFunc func(raw any) string

// Framework tells the middleware what it needs to know about an adapter's
// framework, once, at construction (NewFor). Every field is optional; the
// zero Framework is plain net/http. Its functions are called concurrently
// by requests and must be safe for that.
type Framework struct {
	// Route resolves Request.Route from Request.Raw. Frameworks with
	// colon-style patterns convert them with ColonRoute. Default: the
	// *http.Request's Pattern, as PatternRoute reads it.
	Route RouteFunc

	// View fills v.Method, v.Path, v.RemoteAddr and v.Header (and
	// v.ClientIP, if the framework resolves the client itself) from raw,
	// for Execute and ExecuteInPlace. It runs only when a function may
	// read the view. Default: from raw when it is an
	// *http.Request, else nothing. Serve and Handler take these fields
	// from the *http.Request.
	View func(raw any, v *Request)

	// SetHeader sets a header field on raw's response: Execute and
	// ExecuteInPlace use it to put the RateLimit fields on admitted
	// responses of a rate-limited route before fn runs. Nil:
	// none are set. Serve and Handler use the http.ResponseWriter.
	SetHeader func(raw any, name, value string)
}

// PatternRoute is the default RouteFunc: the Pattern of raw, an
// *http.Request routed by http.ServeMux (or a router that sets Pattern),
// converted to Request.Route's format: "GET example.com/files/{path...}"
// becomes "/files/*". It returns "" for anything else.
func PatternRoute(raw any) string {
	r, ok := raw.(*http.Request)
	if !ok {
		return ""
	}
	return muxRoute(r.Pattern)
}

// muxRoute converts a ServeMux pattern, "[METHOD ][HOST]/PATH", to the
// route format: no method or host, "{name...}" as "*", no "{$}".
func muxRoute(p string) string {
	if p == "" {
		return ""
	}
	i := strings.IndexByte(p, '/')
	if i < 0 {
		return ""
	}
	p = p[i:] // drop the method and the host
	if !strings.Contains(p, "{") {
		return p
	}
	p = strings.TrimSuffix(p, "{$}")
	if strings.HasSuffix(p, "...}") {
		if i := strings.LastIndexByte(p, '{'); i >= 0 {
			p = p[:i] + "*"
		}
	}
	return p
}

// ColonRoute converts a route pattern in the colon style of gin, echo and
// fiber to Request.Route's format: ":name" (and fiber's ":name?" and
// ":name<constraint>") becomes "{name}", and a wildcard ("*", "*name",
// fiber's "+") becomes "*". "/users/:id" gives "/users/{id}" and
// "/files/*filepath" gives "/files/*". A pattern with neither is returned
// unchanged.
func ColonRoute(pattern string) string {
	if !strings.ContainsAny(pattern, ":*+") {
		return pattern
	}
	var b strings.Builder
	b.Grow(len(pattern) + 4)
	for i := 0; i < len(pattern); {
		c := pattern[i]
		switch {
		case c == ':' && (i == 0 || pattern[i-1] == '/'):
			j := i + 1
			for j < len(pattern) && pattern[j] != '/' && pattern[j] != '<' && pattern[j] != '?' && pattern[j] != '.' && pattern[j] != '-' {
				j++
			}
			b.WriteByte('{')
			b.WriteString(pattern[i+1 : j])
			b.WriteByte('}')
			if j < len(pattern) && pattern[j] == '<' { // fiber constraint
				if k := strings.IndexByte(pattern[j:], '>'); k >= 0 {
					j += k + 1
				}
			}
			if j < len(pattern) && pattern[j] == '?' { // fiber optional
				j++
			}
			i = j
		case (c == '*' || c == '+') && (i == 0 || pattern[i-1] == '/'):
			b.WriteByte('*')
			j := i + 1
			for j < len(pattern) && pattern[j] != '/' {
				j++
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}
