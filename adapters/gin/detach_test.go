package resiliencegin_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	resiliencegin "github.com/ylcnfrht/resilience/adapters/gin"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestHTTP2LateHandlerKeepsItsContext: over HTTP/2 a handler that keeps
// using its *gin.Context after its 504 (c.Set, c.Param, c.Error, c.JSON)
// while gin recycles that context for other requests (in time, with other
// params, while it runs) sees only its own request's data, and so do the others; the
// middleware in front of ours reads, after c.Next, the 504 in
// c.Writer.Status(), an aborted chain and its own keys without the late
// handler's, or, for a request answered in time, the handler's keys and
// status. Run it with the race detector.
func TestHTTP2LateHandlerKeepsItsContext(t *testing.T) {
	forFallback(t, func(t *testing.T, fallback bool) {
		// The in-time requests must stay in time on a loaded machine under
		// the race detector: the timeout is far from their duration.
		mw, err := resiliencegin.New(inbound.Options{Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		const late, fast = 16, 64
		started := make([]chan struct{}, late) // a late handler has set its keys
		for i := range started {
			started[i] = make(chan struct{})
		}
		stop := make(chan struct{})
		var handlers sync.WaitGroup
		handlers.Add(late)
		e := gin.New()
		e.ContextWithFallback = fallback
		e.Use(func(c *gin.Context) { // before the middleware
			path := c.Request.URL.Path
			c.Set("outer", path)
			c.Next()
			status, aborted := c.Writer.Status(), c.IsAborted()
			outer, _ := c.Get("outer")
			if outer != path {
				t.Errorf("%s: outer key %v after the chain", path, outer)
			}
			if c.Param("id") == "" {
				t.Errorf("%s: no id param after the chain", path)
			}
			switch c.FullPath() {
			case "/late/:id":
				var n int
				_, _ = fmt.Sscan(c.Param("id"), &n)
				<-started[n] // the late handler sets its keys meanwhile
				for range 20 {
					if _, ok := c.Get("late"); ok {
						t.Errorf("%s: the late handler's key in c after the 504", path)
					}
					time.Sleep(50 * time.Microsecond)
				}
				if _, ok := c.Get("late"); ok || status != http.StatusGatewayTimeout || !aborted || len(c.Errors) != 0 {
					t.Errorf("%s after its 504: keys %v, status %d, aborted %v, errors %v; want the 504, aborted, nothing of the late handler's", path, c.Keys, status, aborted, c.Errors)
				}
			case "/fast/:id":
				if got := c.GetString("fast"); got != c.Param("id") || status != http.StatusOK || aborted || len(c.Errors) != 1 {
					t.Errorf("%s in time: key %q, status %d, aborted %v, errors %v; want the handler's key, 200, not aborted, one error", path, got, status, aborted, c.Errors)
				}
			}
		}, mw.Handler)
		e.GET("/late/:id", func(c *gin.Context) {
			defer handlers.Done()
			id := c.Param("id")
			var n int
			if _, err := fmt.Sscan(id, &n); err != nil {
				t.Error(err)
				return
			}
			<-c.Request.Context().Done() // the deadline passed
			defer close(started[n])
			c.Set("late", -1)
			for i := 0; ; i++ {
				c.Set("late", i)
				if i == 0 {
					started[n] <- struct{}{}
				}
				if got, _ := c.Get("outer"); got != "/late/"+id || c.Param("id") != id || c.FullPath() != "/late/:id" {
					t.Errorf("late handler %s sees outer %v, param %q, route %q", id, got, c.Param("id"), c.FullPath())
				}
				_ = c.Error(errors.New("late"))
				c.JSON(http.StatusOK, gin.H{"id": id}) // dropped: the 504 is out
				_ = c.Writer.Status()
				select {
				case <-stop: // the other requests are done
					return
				case <-time.After(100 * time.Microsecond):
				}
			}
		})
		e.GET("/fast/:id", func(c *gin.Context) {
			c.Set("fast", c.Param("id"))
			_ = c.Error(errors.New("fast"))
			c.String(http.StatusOK, c.Param("id"))
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
			})
		}
		clients.Wait() // every late handler runs on, past its 504
		for i := range fast {
			clients.Go(func() {
				id := fmt.Sprint(1000 + i)
				resp, body, err := get(t, client, srv.URL+"/fast/"+id)
				if err != nil || resp.StatusCode != http.StatusOK || string(body) != id {
					t.Errorf("fast %s: %d %q %v", id, resp.StatusCode, body, err)
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
	})
}

// TestHTTP2InTimeChainAsOnHTTP1: a chain that completes in time over
// HTTP/2 leaves c as it leaves it over HTTP/1: the middleware in front
// sees the keys set behind it, its errors, the status it set without a
// body, the route's params, and c.IsAborted as the chain left it; a
// handler after an aborting one does not run.
func TestHTTP2InTimeChainAsOnHTTP1(t *testing.T) {
	type seen struct {
		key     string
		errors  int
		status  int
		aborted bool
		param   string
		after   bool
	}
	run := func(t *testing.T, h2 bool) map[string]seen {
		mw, err := resiliencegin.New(inbound.Options{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		got := map[string]seen{}
		e := gin.New()
		e.Use(func(c *gin.Context) {
			c.Next()
			mu.Lock()
			defer mu.Unlock()
			s := got[c.FullPath()]
			s.key, s.errors, s.status, s.aborted, s.param = c.GetString("k"), len(c.Errors), c.Writer.Status(), c.IsAborted(), c.Param("id")
			got[c.FullPath()] = s
		}, mw.Handler)
		after := func(c *gin.Context) {
			mu.Lock()
			defer mu.Unlock()
			s := got[c.FullPath()]
			s.after = true
			got[c.FullPath()] = s
		}
		e.GET("/abort/:id", func(c *gin.Context) {
			c.Set("k", "a"+c.Param("id"))
			_ = c.Error(errors.New("x"))
			c.AbortWithStatus(http.StatusForbidden)
		}, after)
		e.GET("/status/:id", func(c *gin.Context) {
			c.Set("k", "s"+c.Param("id"))
			c.Status(http.StatusCreated)
		}, after)
		e.GET("/body/:id", func(c *gin.Context) {
			c.Set("k", "b"+c.Param("id"))
			c.String(http.StatusAccepted, "b")
		}, after)
		var do func(path string) (int, string)
		if h2 {
			srv, client, _ := startH2C(t, e)
			do = func(path string) (int, string) {
				resp, body, err := get(t, client, srv.URL+path)
				if err != nil || resp.ProtoMajor != 2 {
					t.Fatalf("%s: %s %v", path, resp.Proto, err)
				}
				return resp.StatusCode, string(body)
			}
		} else {
			ts := serveGin(t, e)
			do = func(path string) (int, string) { code, body, _ := ts.get(t, path); return code, body }
		}
		for path, want := range map[string]string{"/abort/1": "403 ", "/status/2": "201 ", "/body/3": "202 b"} {
			if code, body := do(path); fmt.Sprint(code, " ", body) != want {
				t.Errorf("%s: %d %q, want %q", path, code, body, want)
			}
		}
		waitIdle(t, mw)
		return got
	}
	gin.SetMode(gin.ReleaseMode)
	h1 := run(t, false)
	h2 := run(t, true)
	if !reflect.DeepEqual(h1, h2) {
		t.Errorf("over HTTP/2 the chain left\n%+v\nover HTTP/1\n%+v", h2, h1)
	}
	if want := (seen{key: "a1", errors: 1, status: 403, aborted: true, param: "1"}); h2["/abort/:id"] != want {
		t.Errorf("aborting chain: %+v, want %+v", h2["/abort/:id"], want)
	}
	if want := (seen{key: "s2", status: 201, param: "2", after: true}); h2["/status/:id"] != want {
		t.Errorf("status-only chain: %+v, want %+v", h2["/status/:id"], want)
	}
}

// TestHTTP2PanicReachesRecovery: a handler's panic before its deadline,
// over HTTP/2, reaches gin's Recovery in front of the middleware, which
// answers; the permit is back.
func TestHTTP2PanicReachesRecovery(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	mw, err := resiliencegin.New(inbound.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	recovered := make(chan any, 1)
	e := gin.New()
	e.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, v any) {
		recovered <- v
		c.String(http.StatusTeapot, "recovered %v", c.GetString("k"))
	}))
	e.Use(mw.Handler)
	e.GET("/panic", func(c *gin.Context) { c.Set("k", "set before"); panic("a handler's bug") })
	srv, client, _ := startH2C(t, e)
	resp, body, err := get(t, client, srv.URL+"/panic")
	if err != nil || resp.StatusCode != http.StatusTeapot || string(body) != "recovered set before" {
		t.Fatalf("got %d %q %v, want Recovery's 418", resp.StatusCode, body, err)
	}
	if v := <-recovered; v != "a handler's bug" {
		t.Errorf("Recovery got %v", v)
	}
	waitIdle(t, mw)
}

// TestHTTP2RejectionAsHTTP1: a timed middleware's rejections (429 from
// the rate limit, 503 from a full limiter) carry over HTTP/2 the status,
// fields and body they carry over HTTP/1.
func TestHTTP2RejectionAsHTTP1(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	serve := func(t *testing.T, h2 bool) []answer {
		mw, err := resiliencegin.New(inbound.Options{
			Timeout:     time.Minute,
			RateLimit:   &resilience.RateLimiterOptions{PermitLimit: 2, Window: time.Hour, Key: func(context.Context) string { return "one" }},
			Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		hold, held := make(chan struct{}), make(chan struct{})
		e := gin.New()
		e.Use(mw.Handler)
		e.GET("/hold", func(c *gin.Context) { close(held); <-hold; c.String(200, "held") })
		e.GET("/x", func(c *gin.Context) { c.String(200, "x") })
		var client *http.Client
		var base string
		if h2 {
			srv, c, _ := startH2C(t, e)
			client, base = c, srv.URL
		} else {
			ts := serveGin(t, e)
			client, base = ts.client, ts.URL
		}
		do := func(path string) answer {
			resp, err := client.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			return answerOf(t, resp, "Date", "Retry-After", "Ratelimit-Reset", "Connection") // counting down, or hop-by-hop
		}
		done := make(chan answer)
		go func() { done <- do("/hold") }()
		<-held
		full := do("/x") // the one permit is held: 503
		close(hold)
		first := <-done
		limited := do("/x") // the window's two permits are spent: 429
		waitIdle(t, mw)
		return []answer{first, full, limited}
	}
	h1, h2 := serve(t, false), serve(t, true)
	if h1[1].status != http.StatusServiceUnavailable || h1[2].status != http.StatusTooManyRequests {
		t.Fatalf("over HTTP/1: %d then %d, want 503 then 429", h1[1].status, h1[2].status)
	}
	if !reflect.DeepEqual(h1, h2) {
		t.Errorf("over HTTP/2\n%+v\nover HTTP/1\n%+v", h2, h1)
	}
}

// TestHTTP2LateHandleContext: a late handler that re-enters the engine
// with its context (engine.HandleContext, an internal redirect) after its
// 504, while other requests reuse gin's pooled contexts, routes with
// buffers of its own: no race, the others' params intact, nothing logged.
func TestHTTP2LateHandleContext(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	// The 64 rerouted requests must stay in time on a loaded machine: the
	// timeout is far from their duration.
	mw, err := resiliencegin.New(inbound.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var late sync.WaitGroup
	late.Add(1)
	rerouted := make(chan string, 1)
	answered, stop := make(chan struct{}), make(chan struct{})
	e := gin.New()
	e.Use(mw.Handler)
	e.GET("/old/:id", func(c *gin.Context) {
		defer late.Done()
		<-c.Request.Context().Done()
		<-answered // the client has its 504
		got := ""
		for {
			c.Request.URL.Path = "/new/7/x"
			e.HandleContext(c) // its deadline passed: the middleware drops it
			if p := c.Param("id") + " " + c.Param("more"); p != "7 x" && got == "" {
				got = p
			}
			select {
			case <-stop:
				rerouted <- cmp.Or(got, "7 x")
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	})
	e.GET("/new/:id/:more", func(c *gin.Context) { c.String(http.StatusOK, c.Param("id")) })
	srv, client, logged := startH2C(t, e)
	resp, _, err := get(t, client, srv.URL+"/old/7")
	if err != nil || resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("old: %d %v, want a clean 504", resp.StatusCode, err)
	}
	close(answered)
	var clients sync.WaitGroup
	for i := range 64 {
		clients.Go(func() {
			id := fmt.Sprint(100 + i)
			resp, body, err := get(t, client, srv.URL+"/new/"+id+"/y")
			if err != nil || resp.StatusCode != http.StatusOK || string(body) != id {
				t.Errorf("new %s: %d %q %v", id, resp.StatusCode, body, err)
			}
		})
	}
	clients.Wait()
	close(stop)
	late.Wait()
	if got := <-rerouted; got != "7 x" { // the routing wrote its own buffers
		t.Errorf("the late HandleContext routed with params %q, want \"7 x\"", got)
	}
	waitIdle(t, mw)
	if got := logged.String(); got != "" {
		t.Errorf("server log %q, want nothing", got)
	}
}
