package route

import (
	"net/http"
	"strings"
	"testing"
)

// Route has one format for every framework: colon-style patterns convert
// to it, so a priority function comparing routes carries over unchanged.
func TestColonRoute(t *testing.T) {
	for in, want := range map[string]string{
		"":                        "",
		"/":                       "/",
		"/users":                  "/users",
		"/users/:id":              "/users/{id}",
		"/users/:id/posts/:post":  "/users/{id}/posts/{post}",
		"/files/*filepath":        "/files/*",
		"/static/*":               "/static/*",
		"*":                       "*",
		"/users/:id?":             "/users/{id}",
		"/users/:id<int>":         "/users/{id}",
		"/users/:id<range(1,9)>/": "/users/{id}/",
		"/files/+":                "/files/*",
		"/a:b":                    "/a:b", // a colon inside a segment is literal
		"/users/{id}":             "/users/{id}",
	} {
		if got := Colon(in); got != want {
			t.Errorf("Colon(%q) = %q, want %q", in, got, want)
		}
	}
}

// The route converters never panic and are idempotent: a converted route
// is already in Request.Route's format, so converting it again changes
// nothing, and no segment of it starts with a colon.
func FuzzRouteFormat(f *testing.F) {
	for _, s := range []string{"/users/:id", "/files/*filepath", "/a/:b<int>?/c", "GET example.com/x/{p...}", "/x/{$}", ":", "*", "+", "/:/:", "GET  /"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c := Colon(p)
		if Colon(c) != c {
			t.Errorf("ColonRoute not idempotent: %q → %q → %q", p, c, Colon(c))
		}
		if strings.HasPrefix(c, ":") || strings.Contains(c, "/:") {
			t.Errorf("Colon(%q) = %q keeps a colon parameter", p, c)
		}
		if !validMuxPattern(p) {
			return
		}
		r := Mux(p)
		if Mux(r) != r || !strings.HasPrefix(r, "/") || strings.Contains(r, "...}") {
			t.Errorf("Mux(%q) = %q, then %q", p, r, Mux(r))
		}
	})
}

// validMuxPattern reports whether http.ServeMux accepts p.
func validMuxPattern(p string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	http.NewServeMux().Handle(p, http.NotFoundHandler())
	return true
}

// chi's patterns lose a parameter's regular expression, braces in it
// included; a pattern without one is returned as it is.
func TestBrace(t *testing.T) {
	for in, want := range map[string]string{
		"/users/{id}":          "/users/{id}",
		"/users/{id:[0-9]+}":   "/users/{id}",
		"/d/{d:\\d{4}}/x":      "/d/{d}/x",
		"/a/{b:x}/c/{d}":       "/a/{b}/c/{d}",
		"/unbalanced/{x:[a-z]": "/unbalanced/{x:[a-z]",
	} {
		if got := Brace(in); got != want {
			t.Errorf("Brace(%q) = %q, want %q", in, got, want)
		}
	}
}

// fiber's syntax: parameters anywhere in a segment, constraints and the
// optional mark dropped, escapes kept literally.
func TestFiber(t *testing.T) {
	for in, want := range map[string]string{
		"/users/:id":          "/users/{id}",
		"/flights/:from-:to":  "/flights/{from}-{to}",
		"/users/:id<int>?":    "/users/{id}",
		"/r/:x<regex(a>b)>/y": "/r/{x}/y",
		"/files/*":            "/files/*",
		"/api/+":              "/api/*",
		"/time\\:now":         "/time:now",
		"/plain":              "/plain",
	} {
		if got := Fiber(in); got != want {
			t.Errorf("Fiber(%q) = %q, want %q", in, got, want)
		}
	}
}
