package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	resiliencefiber "github.com/ylcnfrht/resilience/adapters/fiber"
)

// probe is one raw request; its text after the request line's target.
type probe struct {
	name string
	raw  func(target string) string
}

func header(lines ...string) string { return strings.Join(lines, "\r\n") + "\r\n\r\n" }

// Large requests net/http's default limits (1 MB of header) take.
var largeProbes = []probe{
	{"100 KB header", func(t string) string {
		return header("GET "+t+" HTTP/1.1", "Host: x", "X-Pad: "+strings.Repeat("a", 100<<10))
	}},
	{"10 KB X-Priority", func(t string) string {
		return header("GET "+t+" HTTP/1.1", "Host: x", "X-Priority: "+strings.Repeat("1", 10<<10))
	}},
	{"10,000 headers", func(t string) string {
		lines := []string{"GET " + t + " HTTP/1.1", "Host: x"}
		for i := range 10_000 {
			lines = append(lines, fmt.Sprintf("X-H-%d: v", i))
		}
		return header(lines...)
	}},
	{"100 KB query", func(t string) string {
		return header("GET "+t+"&pad="+strings.Repeat("q", 100<<10)+" HTTP/1.1", "Host: x")
	}},
}

// Malformed requests net/http refuses (400, 501, 505) and fasthttp answers.
var looseProbes = []probe{
	{"two Content-Length values", func(t string) string {
		return header("GET "+t+" HTTP/1.1", "Host: x", "Content-Length: 1", "Content-Length: 2") + "ab"
	}},
	{"Transfer-Encoding: xchunked", func(t string) string {
		return header("GET "+t+" HTTP/1.1", "Host: x", "Transfer-Encoding: xchunked") + "0\r\n\r\n" // read as chunked
	}},
	{"Transfer-Encoding: identity", func(t string) string {
		return header("GET "+t+" HTTP/1.1", "Host: x", "Transfer-Encoding: identity", "Content-Length: 0")
	}},
	{"HTTP/9.9", func(t string) string { return header("GET "+t+" HTTP/9.9", "Host: x") }},
	{"no Host", func(t string) string { return header("GET " + t + " HTTP/1.1") }},
	{"NUL in a header name", func(t string) string { return header("GET "+t+" HTTP/1.1", "Host: x", "X-A\x00b: 1") }},
}

// send writes one raw request to addr and returns the status code, or
// "reset" when the connection closed without a status line.
func send(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck
	go io.WriteString(c, req)                       //nolint:errcheck // the server may close before reading it all
	line, err := bufio.NewReader(c).ReadString('\n')
	if f := strings.Fields(line); err == nil && len(f) >= 2 {
		return f[1]
	}
	return "reset"
}

// serveFiber serves the example's app with cfg on loopback.
func serveFiber(t *testing.T, cfg fiber.Config) string {
	t.Helper()
	mw, err := resiliencefiber.New(options())
	if err != nil {
		t.Fatal(err)
	}
	app := newApp(mw, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(ln)                  //nolint:errcheck
	t.Cleanup(func() { app.Shutdown() }) //nolint:errcheck
	return ln.Addr().String()
}

// The example's buffers take the large requests a net/http server takes,
// where fiber's defaults answer 431; and fasthttp answers the malformed
// requests net/http refuses, as adapters/fiber/README.md says (a proxy
// that normalises requests belongs in front of it).
func TestFiberHeaderLimitsAndParsing(t *testing.T) {
	const target = "/orders/1?ms=1"
	std := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })) //nolint:errcheck
	defer std.Close()
	stdAddr := std.Listener.Addr().String()

	defaults := appConfig()
	defaults.ReadBufferSize, defaults.ReduceMemoryUsage = 0, false
	before, after := serveFiber(t, defaults), serveFiber(t, appConfig())
	for _, p := range largeProbes {
		req := p.raw(target)
		b, a, n := send(t, before, req), send(t, after, req), send(t, stdAddr, req)
		t.Logf("%-28s fiber defaults %-5s example %-5s net/http %s", p.name, b, a, n)
		if a != "200" || n != "200" || b == "200" {
			t.Errorf("%s: fiber's defaults %s, the example %s, net/http %s; want not 200, 200, 200", p.name, b, a, n)
		}
	}
	for _, p := range looseProbes {
		req := p.raw(target)
		a, n := send(t, after, req), send(t, stdAddr, req)
		t.Logf("%-28s example %-5s net/http %s", p.name, a, n)
		if a != "200" || n != "400" && n != "501" && n != "505" {
			t.Errorf("%s: the example %s, net/http %s; want 200 (fasthttp's looser parsing), and 400, 501 or 505", p.name, a, n)
		}
	}
}
