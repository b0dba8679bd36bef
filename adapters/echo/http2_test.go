package resilienceecho_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ylcnfrht/resilience/adapters/echo"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// TestHTTP2TimeoutEndsStream: over HTTP/2 (h2c), with echo served
// directly (e.Use(mw.Handler) and nothing else), the 504 reaches the
// client at the deadline while the handler, ignoring its context, still
// runs, and its stream ends cleanly (no reset: the body reads to its end
// without error); nothing is logged, and the connection serves other
// requests meanwhile.
func TestHTTP2TimeoutEndsStream(t *testing.T) {
	mw, e, open, returned := newSlowEcho(t)
	defer open()
	e.GET("/ok", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	srv, client, logged := startH2C(t, e)

	resp, body, err := get(t, client, srv.URL+"/slow")
	want := timeoutBody(t, mw)
	if err != nil || resp.ProtoMajor != 2 || resp.StatusCode != http.StatusGatewayTimeout || string(body) != want {
		t.Fatalf("got %s %d %q %v, want an HTTP/2 504 %q whose stream ends cleanly", resp.Proto, resp.StatusCode, body, err, want)
	}
	stillRunning(t, returned)
	resp, body, err = get(t, client, srv.URL+"/ok")
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("while the late handler runs: %d %q %v, want 200 ok", resp.StatusCode, body, err)
	}
	stillRunning(t, returned)
	endQuietly(t, mw, open, returned, logged)
}

// Served through Router (what custom contexts need), or adapt.DetachHTTP2
// itself, the request is not detached a second time: the 504 ends its
// stream cleanly as well, and nothing is logged.
func TestHTTP2TimeoutEndsStreamUnderRouter(t *testing.T) {
	for name, wrap := range map[string]func(*resilienceecho.Middleware, http.Handler) http.Handler{
		"Router":            func(mw *resilienceecho.Middleware, h http.Handler) http.Handler { return mw.Router(h) },
		"adapt.DetachHTTP2": func(_ *resilienceecho.Middleware, h http.Handler) http.Handler { return adapt.DetachHTTP2(h) },
	} {
		t.Run(name, func(t *testing.T) {
			mw, e, open, returned := newSlowEcho(t)
			defer open()
			srv, client, logged := startH2C(t, wrap(mw, e))
			resp, body, err := get(t, client, srv.URL+"/slow")
			if err != nil || resp.ProtoMajor != 2 || resp.StatusCode != http.StatusGatewayTimeout {
				t.Fatalf("got %s %d %q %v, want an HTTP/2 504 whose stream ends cleanly", resp.Proto, resp.StatusCode, body, err)
			}
			stillRunning(t, returned)
			endQuietly(t, mw, open, returned, logged)
		})
	}
}

// customContext is the common echo pattern of a context of one's own,
// wrapping echo's.
type customContext struct{ echo.Context }

// TestHTTP2CustomContextWholeThenReset: a custom context cannot be copied,
// so without Router its 504 reaches the client whole at the deadline while
// the handler still runs, its stream is then reset (at most), and the
// server logs it once, naming Router; the connection serves other
// requests meanwhile. Under Router the stream ends cleanly.
func TestHTTP2CustomContextWholeThenReset(t *testing.T) {
	for _, router := range []bool{false, true} {
		mw, err := resilienceecho.New(inbound.Options{
			Timeout:     50 * time.Millisecond,
			Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4},
		})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var handlers sync.WaitGroup
		e, _ := newEcho()
		e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error { return next(&customContext{c}) }
		}, mw.Handler)
		e.GET("/slow", func(c echo.Context) error {
			defer handlers.Done()
			if _, ok := c.(*customContext); !ok {
				t.Errorf("the handler got %T, want the custom context", c)
			}
			<-release
			return nil
		})
		e.GET("/ok", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
		var h http.Handler = e
		if router {
			h = mw.Router(e)
		}
		srv, client, logged := startH2C(t, h)
		want := timeoutBody(t, mw)
		for range 2 {
			handlers.Add(1)
			resp, body, err := get(t, client, srv.URL+"/slow")
			if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusGatewayTimeout || string(body) != want || (router && err != nil) {
				t.Fatalf("Router %v: got %s %d %q %v, want the HTTP/2 504 %q whole", router, resp.Proto, resp.StatusCode, body, err, want)
			}
			resp, body, err = get(t, client, srv.URL+"/ok")
			if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok" {
				t.Fatalf("while the late handler runs: %d %q %v, want 200 ok", resp.StatusCode, body, err)
			}
		}
		close(release)
		handlers.Wait()
		waitIdle(t, mw)
		got := logged.String()
		if router && got != "" {
			t.Errorf("under Router: server log %q, want nothing", got)
		}
		if !router && (strings.Count(got, "\n") != 1 || !strings.Contains(got, "Router")) {
			t.Errorf("without Router: server log %q, want one line naming Router", got)
		}
	}
}

// startH2C serves h over h2c on loopback, its ErrorLog kept, and returns
// a client whose timeout fails a 504 held back until the handler returns.
func startH2C(t *testing.T, h http.Handler) (*httptest.Server, *http.Client, *syncBuffer) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	logged := new(syncBuffer)
	srv.Config.ErrorLog = log.New(logged, "", 0)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return srv, &http.Client{Transport: tr, Timeout: 10 * time.Second}, logged
}

// newSlowEcho makes a middleware of 50 ms Timeout (two permits) and an
// echo using it whose GET /slow ignores its context: it runs until open
// is called, then returned is closed. open may be called more than once;
// defer it, so that a failing test lets the handler end.
func newSlowEcho(t *testing.T) (mw *resilienceecho.Middleware, e *echo.Echo, open func(), returned <-chan struct{}) {
	t.Helper()
	mw, err := resilienceecho.New(inbound.Options{
		Timeout:     50 * time.Millisecond,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	release, ret := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e, _ = newEcho()
	e.Use(mw.Handler)
	e.GET("/slow", func(c echo.Context) error { defer close(ret); <-release; return nil })
	return mw, e, func() { once.Do(func() { close(release) }) }, ret
}

// get GETs url with client and reads the whole body; err is the body's.
func get(t *testing.T, client *http.Client, url string) (*http.Response, []byte, error) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body, err
}

// stillRunning fails t if returned is closed: the 504 must come at the
// deadline, not when the late handler returns.
func stillRunning(t *testing.T, returned <-chan struct{}) {
	t.Helper()
	select {
	case <-returned:
		t.Fatal("the 504 came only when the handler returned")
	default:
	}
}

// timeoutBody is the 504's body mw renders.
func timeoutBody(t *testing.T, mw *resilienceecho.Middleware) string {
	t.Helper()
	want, ok := (&adapt.Kit{Middleware: mw.Inbound()}).Render(&resilience.TimeoutRejectedError{})
	if !ok {
		t.Fatal("no 504 rendered")
	}
	return string(want.Body)
}

// TestOverHTTP2 runs the tests of echo's flow around the 504
// (ContextTimeout, races on the context, the route, rejections through
// echo's error handlers) over HTTP/2, where the middleware runs the chain
// on a worker for a copy of the context. TestAfterThe504 is not among
// them: over HTTP/2 a panic after the 504 no longer reaches echo's
// Recover, the request being over; it is logged as net/http logs a
// handler's.
func TestOverHTTP2(t *testing.T) {
	overHTTP2 = true
	defer func() { overHTTP2 = false }()
	for name, test := range map[string]func(*testing.T){
		"RejectionsThroughDefaultErrorHandler": TestRejectionsThroughDefaultErrorHandler,
		"RejectionsThroughCustomErrorHandler":  TestRejectionsThroughCustomErrorHandler,
		"ContextTimeoutInChain":                TestContextTimeoutInChain,
		"ContextAndRoute":                      TestContextAndRoute,
		"NoRaceOnEchoContext":                  TestNoRaceOnEchoContext,
		"UpstreamDeadlineWithoutTimeout":       TestUpstreamDeadlineWithoutTimeout,
	} {
		t.Run(name, test)
	}
}

// endQuietly lets the late handler return, waits for it and for the
// middleware to be idle, and fails t if the server logged anything.
func endQuietly(t *testing.T, mw *resilienceecho.Middleware, open func(), returned <-chan struct{}, logged *syncBuffer) {
	t.Helper()
	open()
	<-returned
	waitIdle(t, mw)
	if got := logged.String(); got != "" {
		t.Errorf("server log %q, want nothing", got)
	}
}
