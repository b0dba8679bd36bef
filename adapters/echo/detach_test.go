package resilienceecho_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/ylcnfrht/resilience/adapters/echo"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestHTTP2LateHandlerKeepsItsContext: over HTTP/2 a handler that keeps
// using its echo.Context after its 504 (c.Set, c.Get, c.Param, c.JSON,
// c.Response()) while echo recycles that context for other requests (in
// time, with other params, while it runs) sees only its own request's
// data, and so do the others. The middleware in front of ours reads,
// after next, its own store value and params, and a committed 504 without
// the late handler's values, or, for a request answered in time, the
// handler's value and status; its Response Before hook, which reaches its
// context, runs for a request answered in time and never after a 504. Run
// it with the race detector.
func TestHTTP2LateHandlerKeepsItsContext(t *testing.T) {
	// The in-time requests must stay in time on a loaded machine under
	// the race detector: the timeout is far from their duration.
	mw, err := resilienceecho.New(inbound.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const late, fast = 16, 64
	started := make([]chan struct{}, late) // a late handler has set its values
	for i := range started {
		started[i] = make(chan struct{})
	}
	stop := make(chan struct{})
	var handlers sync.WaitGroup
	handlers.Add(late)
	e, _ := newEcho()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc { // before the middleware
		return func(c echo.Context) error {
			path := c.Request().URL.Path
			c.Set("outer", path)
			c.Response().Before(func() { c.Response().Header().Set("X-Outer", c.Get("outer").(string)) })
			err := next(c)
			res := c.Response()
			if got := c.Get("outer"); got != path {
				t.Errorf("%s: outer value %v after the chain", path, got)
			}
			id := c.Param("id")
			if !strings.HasSuffix(path, "/"+id) {
				t.Errorf("%s: param id %q after the chain", path, id)
			}
			switch c.Path() {
			case "/late/:id":
				var n int
				_, _ = fmt.Sscan(id, &n)
				<-started[n] // the late handler sets its values meanwhile
				for range 20 {
					if c.Get("late") != nil {
						t.Errorf("%s: the late handler's value in c after the 504", path)
					}
					time.Sleep(50 * time.Microsecond)
				}
				if err != nil || res.Status != http.StatusGatewayTimeout || !res.Committed || c.Get("late") != nil {
					t.Errorf("%s after its 504: error %v, status %d, committed %v, late %v; want the 504 and nothing of the late handler's", path, err, res.Status, res.Committed, c.Get("late"))
				}
			case "/fast/:id":
				if got := c.Get("fast"); got != id || err != nil || res.Status != http.StatusOK || !res.Committed {
					t.Errorf("%s in time: value %v, error %v, status %d, committed %v; want the handler's value, 200", path, got, err, res.Status, res.Committed)
				}
			}
			return err
		}
	}, mw.Handler)
	e.GET("/late/:id", func(c echo.Context) error {
		defer handlers.Done()
		id := c.Param("id")
		var n int
		if _, err := fmt.Sscan(id, &n); err != nil {
			t.Error(err)
			return nil
		}
		<-c.Request().Context().Done() // the deadline passed
		defer close(started[n])
		for i := 0; ; i++ {
			c.Set("late", i)
			if i == 0 {
				started[n] <- struct{}{}
			}
			if got := c.Get("outer"); got != "/late/"+id || c.Param("id") != id || c.Path() != "/late/:id" || c.Get("late") != i {
				t.Errorf("late handler %s sees outer %v, param %q, route %q, late %v", id, got, c.Param("id"), c.Path(), c.Get("late"))
			}
			_ = c.JSON(http.StatusOK, map[string]string{"id": id}) // dropped: the 504 is out
			c.Response().Header().Set("X-Late", id)
			_ = c.Response().Status
			select {
			case <-stop: // the other requests are done
				return errors.New("late") // dropped: the 504 is the response
			case <-time.After(100 * time.Microsecond):
			}
		}
	})
	e.GET("/fast/:id", func(c echo.Context) error {
		c.Set("fast", c.Param("id"))
		return c.String(http.StatusOK, c.Param("id"))
	})
	srv, client, logged := startH2C(t, e)
	want504 := timeoutBody(t, mw)
	var clients sync.WaitGroup
	for i := range late {
		clients.Go(func() {
			resp, body, err := get(t, client, fmt.Sprintf("%s/late/%d", srv.URL, i))
			if err != nil || resp.ProtoMajor != 2 || resp.StatusCode != http.StatusGatewayTimeout || string(body) != want504 {
				t.Errorf("late %d: %s %d %q %v, want an HTTP/2 504 ending cleanly", i, resp.Proto, resp.StatusCode, body, err)
			}
			if got := resp.Header.Get("X-Outer"); got != "" {
				t.Errorf("late %d: the outer Before hook ran for the 504 (X-Outer %q)", i, got)
			}
		})
	}
	clients.Wait() // every late handler runs on, past its 504
	for i := range fast {
		clients.Go(func() {
			id := fmt.Sprint(1000 + i)
			resp, body, err := get(t, client, srv.URL+"/fast/"+id)
			if err != nil || resp.StatusCode != http.StatusOK || string(body) != id || resp.Header.Get("X-Outer") != "/fast/"+id {
				t.Errorf("fast %s: %d %q X-Outer %q %v, want 200, the id and the outer hook's field", id, resp.StatusCode, body, resp.Header.Get("X-Outer"), err)
			}
		})
	}
	clients.Wait()
	close(stop)
	handlers.Wait()
	waitIdle(t, mw)
	if got := logged.String(); got != "" {
		t.Errorf("server log %q, want nothing", got)
	}
}

// exchange is what a client sees of a response, but the fields that
// count down with the clock.
type exchange struct {
	status int
	header http.Header
	body   string
}

// TestHTTP2InTimeAsHTTP1: a request answered in time over HTTP/2, where
// the chain runs on a worker for a copy of the context, leaves everything
// as over HTTP/1: the store values and params the handler set are seen by
// an outer middleware after next, the handler's returned error reaches
// echo's HTTPErrorHandler (after the outer middleware, which sees it),
// Response Before hooks run, a panic before the deadline reaches echo's
// Recover, and a rejection (a 429) is byte for byte the same.
func TestHTTP2InTimeAsHTTP1(t *testing.T) {
	run := func(h2 bool) map[string]exchange {
		mw, err := resilienceecho.New(inbound.Options{
			Timeout: time.Minute,
			RateLimit: &resilience.RateLimiterOptions{PermitLimit: 3, Window: time.Hour,
				Key: func(context.Context) string { return "one" }},
		})
		if err != nil {
			t.Fatal(err)
		}
		e, _ := newEcho()
		e.HTTPErrorHandler = func(err error, c echo.Context) {
			if c.Response().Committed {
				return
			}
			var he *echo.HTTPError
			if errors.As(err, &he) && he.Code == http.StatusTeapot {
				_ = c.String(he.Code, fmt.Sprintf("handled %v, store %v", he.Message, c.Get("inner")))
				return
			}
			e.DefaultHTTPErrorHandler(err, c)
		}
		e.Use(middleware.Recover())
		e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				c.Response().Before(func() { c.Response().Header().Set("X-Before", "outer") })
				err := next(c)
				c.Response().Header().Set("X-After", fmt.Sprintf("inner=%v id=%s err=%T", c.Get("inner"), c.Param("id"), err))
				return err
			}
		}, mw.Handler)
		e.GET("/err/:id", func(c echo.Context) error {
			c.Set("inner", "v"+c.Param("id"))
			c.Response().Before(func() { c.Response().Header().Set("X-Inner-Before", c.Param("id")) })
			return echo.NewHTTPError(http.StatusTeapot, "teapot "+c.Param("id"))
		})
		e.GET("/ok/:id", func(c echo.Context) error {
			c.Set("inner", c.Param("id"))
			return c.JSON(http.StatusCreated, map[string]string{"id": c.Param("id")})
		})
		e.GET("/panic/:id", func(echo.Context) error { panic("boom") })
		var client *http.Client
		var url string
		if h2 {
			srv, c, _ := startH2C(t, e)
			client, url = c, srv.URL
		} else {
			srv := httptest.NewServer(e)
			t.Cleanup(srv.Close)
			client, url = srv.Client(), srv.URL
		}
		got := map[string]exchange{}
		for _, path := range []string{"/err/7", "/ok/8", "/panic/9", "/ok/429"} {
			resp, body, err := get(t, client, url+path)
			if err != nil {
				t.Fatalf("HTTP/2 %v %s: %v", h2, path, err)
			}
			if wantMajor := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != wantMajor {
				t.Fatalf("%s: %s, want HTTP/%d", path, resp.Proto, wantMajor)
			}
			h := maps.Clone(resp.Header)
			for _, k := range []string{"Date", "Retry-After", "Ratelimit-Reset"} {
				delete(h, k)
			}
			got[path] = exchange{resp.StatusCode, h, string(body)}
		}
		waitIdle(t, mw)
		return got
	}
	h1, h2 := run(false), run(true)
	for path, want := range h1 {
		if got := h2[path]; got.status != want.status || got.body != want.body || fmt.Sprint(got.header) != fmt.Sprint(want.header) {
			t.Errorf("%s over HTTP/2:\n%d %v %q\nover HTTP/1:\n%d %v %q", path, got.status, got.header, got.body, want.status, want.header, want.body)
		}
	}
	for path, want := range map[string]exchange{
		"/err/7":   {status: http.StatusTeapot, body: "handled teapot 7, store v7"},
		"/ok/8":    {status: http.StatusCreated, body: "{\"id\":\"8\"}\n"},
		"/panic/9": {status: http.StatusInternalServerError},
		"/ok/429":  {status: http.StatusTooManyRequests},
	} {
		got := h1[path]
		if got.status != want.status || (want.body != "" && got.body != want.body) {
			t.Errorf("%s over HTTP/1: %d %q, want %d %q", path, got.status, got.body, want.status, want.body)
		}
	}
	if got := h1["/err/7"].header; got.Get("X-Before") != "outer" || got.Get("X-Inner-Before") != "7" {
		t.Errorf("/err/7: Before hooks' fields %v", got)
	}
	if got := h1["/ok/8"].header; got.Get("X-Before") != "outer" || got.Get("X-Inner-Before") != "" {
		t.Errorf("/ok/8: Before hooks' fields %v", got)
	}
}

// TestHTTP2LatePanicLogged: over HTTP/2 a panic after the 504 is logged
// to the server's ErrorLog, as net/http logs a handler's, without a
// second response; the 504 ends its stream cleanly.
func TestHTTP2LatePanicLogged(t *testing.T) {
	mw, err := resilienceecho.New(inbound.Options{Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	release, done := make(chan struct{}), make(chan struct{})
	e, _ := newEcho()
	e.Use(middleware.Recover(), mw.Handler)
	e.GET("/late-panic", func(c echo.Context) error {
		defer close(done)
		<-c.Request().Context().Done()
		<-release
		panic("late boom")
	})
	srv, client, logged := startH2C(t, e)
	resp, body, err := get(t, client, srv.URL+"/late-panic")
	if want := timeoutBody(t, mw); err != nil || resp.StatusCode != http.StatusGatewayTimeout || string(body) != want {
		t.Fatalf("got %d %q %v, want the 504 %q ending cleanly", resp.StatusCode, body, err, want)
	}
	close(release)
	<-done
	waitIdle(t, mw)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logged.String(), "late boom"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("server log %q, want the late panic", logged.String())
		}
	}
}
