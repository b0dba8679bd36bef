package resilienceecho_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ylcnfrht/resilience/adapters/echo"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// rawResponse sends one request on a fresh connection and returns the
// response as it came off the wire: the status line, the header fields in
// sorted order (net/http writes a Content-Length it computed itself after
// the others) and the body. The Date field is left out and, for a 429, the
// two fields that count down with the clock (Retry-After and
// RateLimit-Reset, which must be there).
func rawResponse(t *testing.T, base, method, target string) string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n", method, target); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	head, body, found := strings.Cut(string(raw), "\r\n\r\n")
	if !found {
		t.Fatalf("%s %s: no end of header in %q", method, target, raw)
	}
	lines := strings.Split(head, "\r\n")
	fields := lines[1:]
	counting := map[string]bool{}
	fields = slices.DeleteFunc(fields, func(f string) bool {
		switch name, _, _ := strings.Cut(f, ":"); name {
		case "Date":
			return true
		case "Retry-After", "Ratelimit-Reset":
			counting[name] = true
			return true
		}
		return false
	})
	if strings.HasPrefix(lines[0], "HTTP/1.1 429") && (!counting["Retry-After"] || !counting["Ratelimit-Reset"]) {
		t.Errorf("%s %s: a 429 without Retry-After or RateLimit-Reset:\n%s", method, target, raw)
	}
	slices.Sort(fields)
	return lines[0] + "\n" + strings.Join(fields, "\n") + "\n\n" + body
}

// TestRejectionBytesMatchNetHTTP: through echo's default error handler a
// rejection reaches the client byte for byte as the net/http middleware
// sends it (status line, fields, Content-Length, body), whatever that
// handler would otherwise make of the body: indent it (e.Debug, or a
// client's ?pretty), escape HTML in it, wrap a text body from
// Options.Render in {"message": …} (with the error's text under e.Debug),
// or send a HEAD answer without its Content-Length; and echo's Response
// counts the bytes sent.
func TestRejectionBytesMatchNetHTTP(t *testing.T) {
	renders := []struct {
		name   string
		render func(error, inbound.Response) inbound.Response
	}{
		{"default", nil},
		{"Render JSON with spaces and HTML", func(_ error, def inbound.Response) inbound.Response {
			def.Body = []byte("{\n  \"detail\": \"a <b> & c\",\n  \"list\": [1, 2]\n}")
			return def
		}},
		{"Render text", func(_ error, def inbound.Response) inbound.Response {
			def.Header = def.Header.Clone()
			def.Header.Set("Content-Type", "text/plain; charset=utf-8")
			def.Body = []byte("busy, <retry> later")
			return def
		}},
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	for _, rc := range renders {
		for _, debug := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/Debug=%v", rc.name, debug), func(t *testing.T) {
				opts := inbound.Options{
					RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Hour,
						Key: func(context.Context) string { return "one" }},
					Render: rc.render,
				}
				ref, err := inbound.New(opts)
				if err != nil {
					t.Fatal(err)
				}
				mw, err := resilienceecho.New(opts)
				if err != nil {
					t.Fatal(err)
				}
				e, echoLog := newEcho()
				e.Debug = debug
				// As echo's Logger does: the error handled inside, then
				// the bytes sent read from the Response.
				sizes := make(chan int64, 1)
				e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
					return func(c echo.Context) error {
						if err := next(c); err != nil {
							c.Error(err)
							sizes <- c.Response().Size
						}
						return nil
					}
				})
				g := e.Group("", mw.Handler)
				g.Any("/*", echo.WrapHandler(ok))
				want, got := serve(t, ref.Handler(ok)), serve(t, e)
				// The first request takes the one permit of the window.
				for _, s := range []*testServer{want, got} {
					if code, _, _ := s.get(t, "/x"); code != http.StatusOK {
						t.Fatalf("first request: %d, want 200", code)
					}
				}
				for _, method := range []string{http.MethodGet, http.MethodHead} {
					for _, target := range []string{"/x", "/x?pretty"} {
						w, g := rawResponse(t, want.URL, method, target), rawResponse(t, got.URL, method, target)
						if !strings.HasPrefix(w, "HTTP/1.1 429") {
							t.Fatalf("net/http: %s %s got\n%s\nwant a 429", method, target, w)
						}
						if g != w {
							t.Errorf("%s %s:\n%s\nwant, as net/http sends it:\n%s", method, target, g, w)
						}
						_, body, _ := strings.Cut(w, "\n\n")
						if size := <-sizes; size != int64(len(body)) {
							t.Errorf("%s %s: c.Response().Size %d after the error handler, want the %d bytes sent", method, target, size, len(body))
						}
					}
				}
				if s := echoLog.String(); s != "" {
					t.Errorf("echo logged: %s", s)
				}
			})
		}
	}
}
