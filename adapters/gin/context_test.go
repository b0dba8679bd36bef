package resiliencegin_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ylcnfrht/resilience/adapters/gin"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestDeadlineReachesHandler: the handler's context is the pipeline's
// (c.Request carries it): it ends at the deadline with the timeout as its
// cause. With ContextWithFallback, *gin.Context itself reports it; without,
// gin's Done is nil as gin documents, and c.Request.Context() still ends.
// The outer middleware gets its own request back.
func TestDeadlineReachesHandler(t *testing.T) {
	forFallback(t, func(t *testing.T, fallback bool) {
		mw, err := resiliencegin.New(inbound.Options{Timeout: 30 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		type seen struct {
			reqCause, ginErr error
			ginDoneNil       bool
			outerSameReq     bool
		}
		inner, got := make(chan seen, 1), make(chan seen, 1)
		e := gin.New()
		e.ContextWithFallback = fallback
		e.Use(func(c *gin.Context) {
			before := c.Request
			c.Next()
			s := <-inner
			s.outerSameReq = c.Request == before
			got <- s
		})
		e.Use(mw.Handler)
		e.GET("/", func(c *gin.Context) {
			var s seen
			s.ginDoneNil = c.Done() == nil
			<-c.Request.Context().Done()
			s.reqCause = context.Cause(c.Request.Context())
			if !s.ginDoneNil {
				<-c.Done()
				s.ginErr = c.Err()
			}
			inner <- s
		})
		ts := serveGin(t, e)
		if code, _, _ := ts.get(t, "/"); code != 504 {
			t.Fatalf("status %d, want 504", code)
		}
		s := <-got
		if !errors.Is(s.reqCause, resilience.ErrTimeoutRejected) {
			t.Errorf("cause of c.Request.Context(): %v, want a timeout rejection", s.reqCause)
		}
		if s.ginDoneNil == fallback {
			t.Errorf("c.Done() nil = %v with ContextWithFallback %v", s.ginDoneNil, fallback)
		}
		if fallback && !errors.Is(s.ginErr, context.DeadlineExceeded) {
			t.Errorf("c.Err() = %v, want DeadlineExceeded", s.ginErr)
		}
		if !s.outerSameReq {
			t.Error("the outer middleware did not get its own request back")
		}
	})
}

// TestContextAndRoute: priority and key functions get the *gin.Context
// through resiliencegin.Context, and Request.Route in chi's format from
// gin's pattern, through groups, parameters and wildcards.
func TestContextAndRoute(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	type seen struct{ route, fullPath, param string }
	var mu sync.Mutex
	got := map[string]seen{}
	key := func(ctx context.Context) string {
		r, _ := inbound.RequestFrom(ctx)
		c, ok := resiliencegin.Context(ctx)
		if !ok {
			t.Error("resiliencegin.Context: no *gin.Context in a key function's context")
			return ""
		}
		mu.Lock()
		got[c.Request.URL.Path] = seen{r.Route(), c.FullPath(), c.Param("id")}
		mu.Unlock()
		return "k"
	}
	mw, err := resiliencegin.New(inbound.Options{
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1 << 20, Window: time.Hour, Key: key},
	})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(c *gin.Context) {}
	e := gin.New()
	api := e.Group("/api", mw.Handler)
	api.GET("/users/:id", ok)
	api.GET("/users/:id/files/*path", ok)
	api.GET("/static", ok)
	ts := serveGin(t, e)
	tests := []struct{ path, route, id string }{
		{"/api/users/7", "/api/users/{id}", "7"},
		{"/api/users/7/files/a/b.txt", "/api/users/{id}/files/*", "7"},
		{"/api/static", "/api/static", ""},
	}
	for _, tc := range tests {
		if code, _, _ := ts.get(t, tc.path); code != 200 {
			t.Fatalf("%s: %d", tc.path, code)
		}
		mu.Lock()
		s := got[tc.path]
		mu.Unlock()
		if s.route != tc.route || s.param != tc.id {
			t.Errorf("%s: Route %q, id %q (gin's %q); want %q, %q", tc.path, s.route, s.param, s.fullPath, tc.route, tc.id)
		}
	}
	if _, ok := resiliencegin.Context(context.Background()); ok {
		t.Error("resiliencegin.Context found a *gin.Context in an empty context")
	}
}

// TestHijackAndFlushThroughGin: a handler behind the middleware can flush
// through c.Writer (the response is committed at once) and hijack the
// connection through c.Writer (it is then no longer timed).
func TestHijackAndFlushThroughGin(t *testing.T) {
	forFallback(t, func(t *testing.T, fallback bool) {
		mw, err := resiliencegin.New(inbound.Options{Timeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		flushed := make(chan struct{})
		e := gin.New()
		e.ContextWithFallback = fallback
		e.Use(mw.Handler)
		e.GET("/flush", func(c *gin.Context) {
			c.String(200, "first")
			c.Writer.Flush()
			<-flushed
			c.String(200, " second")
		})
		e.GET("/hijack", func(c *gin.Context) {
			conn, rw, err := c.Writer.Hijack()
			if err != nil {
				c.String(500, err.Error())
				return
			}
			defer conn.Close()
			time.Sleep(300 * time.Millisecond) // past the timeout: no 504 may appear
			_, _ = rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
			_ = rw.Flush()
		})
		ts := serveGin(t, e)

		resp, err := ts.client.Get(ts.URL + "/flush")
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		first := make([]byte, 5)
		if _, err := io.ReadFull(br, first); err != nil || string(first) != "first" {
			t.Fatalf("flushed part: %q, %v", first, err)
		}
		close(flushed)
		rest, _ := io.ReadAll(br)
		resp.Body.Close()
		if string(rest) != " second" {
			t.Errorf("after the flush: %q", rest)
		}

		code, body, _ := ts.get(t, "/hijack")
		if code != 200 || body != "hijacked" {
			t.Errorf("hijacked: %d %q", code, body)
		}
		waitIdle(t, mw)
	})
}

// TestNoRaceOnGinContext: under -race, with many requests at once whose
// deadlines fire while the chain uses c (c.Next and c.Abort in an inner
// middleware, c.Writer read and written and c.Header set in a loop,
// c.Set), no access to the pooled *gin.Context, its writer, its header
// map or its index races with the deadline, and every request gets one
// complete response: a 504 carries none of the handler's fields.
func TestNoRaceOnGinContext(t *testing.T) {
	forFallback(t, func(t *testing.T, fallback bool) {
		mw, err := resiliencegin.New(inbound.Options{
			Timeout:     5 * time.Millisecond,
			Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 64, QueueLimit: 64, QueueTimeout: 10 * time.Second},
		})
		if err != nil {
			t.Fatal(err)
		}
		e := gin.New()
		e.ContextWithFallback = fallback
		e.Use(gin.LoggerWithWriter(io.Discard)) // reads c.Writer after the chain
		e.Use(mw.Handler)
		e.Use(func(c *gin.Context) {
			c.Set("k", c.Writer.Status())
			c.Next()
			if c.Writer.Written() {
				c.Abort()
			}
			_, _ = c.Writer.WriteString("")
		})
		e.GET("/w/:n", func(c *gin.Context) {
			for i := 0; ; i++ {
				c.Header("X-N", c.Param("n")) // while the deadline may be writing the 504's fields
				if _, err := c.Writer.WriteString("x"); err != nil || i > 5000 {
					break
				}
				if i%64 == 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
		})
		ts := serveGin(t, e)
		want504 := timeoutBody(t, mw)
		var wg sync.WaitGroup
		for i := range 48 {
			wg.Go(func() {
				resp, err := ts.client.Get(ts.URL + "/w/" + string(rune('a'+i%26)))
				if err != nil {
					return // a response committed and cut at the deadline
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case err != nil:
				case resp.StatusCode == 504 && (string(b) != want504 || resp.Header.Get("X-N") != ""):
					t.Errorf("504 with the handler's X-N %q, body %q", resp.Header.Get("X-N"), b)
				case resp.StatusCode != 504 && resp.StatusCode != 200:
					t.Errorf("status %d", resp.StatusCode)
				}
			})
		}
		wg.Wait()
		waitIdle(t, mw)
	})
}

// TestUpstreamDeadlineWithoutTimeout: without Options.Timeout nothing in
// the adapter answers a deadline, so when a deadline set further out
// passes, the chain's own answer stands: here an error middleware's,
// rendered because nothing was written.
func TestUpstreamDeadlineWithoutTimeout(t *testing.T) {
	forFallback(t, func(t *testing.T, fallback bool) {
		mw, err := resiliencegin.New(inbound.Options{Adaptive: &resilience.AdaptiveLimiterOptions{}})
		if err != nil {
			t.Fatal(err)
		}
		e := gin.New()
		e.ContextWithFallback = fallback
		e.Use(func(c *gin.Context) {
			ctx, cancel := context.WithTimeout(c.Request.Context(), 30*time.Millisecond)
			defer cancel()
			c.Request = c.Request.WithContext(ctx)
			c.Next()
			if len(c.Errors) > 0 && !c.Writer.Written() {
				c.String(503, "upstream deadline")
			}
		})
		e.Use(mw.Handler)
		e.GET("/", func(c *gin.Context) {
			<-c.Request.Context().Done()
			_ = c.Error(c.Request.Context().Err())
		})
		ts := serveGin(t, e)
		if code, body, _ := ts.get(t, "/"); code != 503 || body != "upstream deadline" {
			t.Errorf("got %d %q, want the error middleware's 503", code, body)
		}
		waitIdle(t, mw)
	})
}
