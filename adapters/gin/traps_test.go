package resiliencegin_test

// gin pools its *gin.Context and keeps its own view of the response
// (status, size, "written") in a writer the engine uses once the chain has
// returned. A timeout middleware that runs the handler on another
// goroutine, or writes its answer through the context from the timer,
// breaks both; the tests here replay those failures (responses crossing
// between requests, "Headers were already written", "superfluous
// response.WriteHeader", panics on late writes, races on c.Writer and
// c.index) against the adapter.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ylcnfrht/resilience/adapters/gin"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// syncBuffer is a log sink written by the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// overHTTP2 makes serveGin's servers and clients speak HTTP/2 (h2c) only;
// TestOverHTTP2 sets it while it runs tests written for HTTP/1.
var overHTTP2 bool

// testServer serves h on loopback with its error log captured.
type testServer struct {
	URL    string
	client *http.Client
	log    *syncBuffer
	close  func()
}

func serveGin(t *testing.T, h http.Handler) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errLog := new(syncBuffer)
	srv := &http.Server{Handler: h, ErrorLog: log.New(errLog, "", 0), ReadHeaderTimeout: 10 * time.Second}
	tr := &http.Transport{}
	if overHTTP2 {
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetUnencryptedHTTP2(true)
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	ts := &testServer{URL: "http://" + ln.Addr().String(), client: &http.Client{Transport: tr}, log: errLog}
	ts.close = func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		<-done
	}
	t.Cleanup(ts.close)
	return ts
}

// get returns the status and body of GET path, failing the test on a
// transport error.
func (ts *testServer) get(t *testing.T, path string) (int, string, http.Header) {
	t.Helper()
	resp, err := ts.client.Get(ts.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// timeoutBody is the 504 body every adapter sends, rendered by inbound.
func timeoutBody(t *testing.T, mw *resiliencegin.Middleware) string {
	t.Helper()
	resp, ok := (&adapt.Kit{Middleware: mw.Inbound()}).Render(&resilience.TimeoutRejectedError{})
	if !ok {
		t.Fatal("no 504 rendered")
	}
	return string(resp.Body)
}

// waitIdle waits (bounded) until no handler holds a permit.
func waitIdle(t *testing.T, mw *resiliencegin.Middleware) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for st := mw.Stats(); st.InFlight != 0 || st.Queued != 0 || st.Late != 0; st = mw.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want nothing in flight, queued or late", st)
		}
		time.Sleep(time.Millisecond)
	}
}

func forFallback(t *testing.T, f func(t *testing.T, fallback bool)) {
	gin.SetMode(gin.ReleaseMode)
	for _, fb := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextWithFallback=%v", fb), func(t *testing.T) { f(t, fb) })
	}
}

// TestLateWritesStayInTheirRequest: a handler that writes after its 504
// (through c.String, c.JSON, c.Header and c.Writer) never adds a byte to
// its own answer nor to another request's, with or without the middleware,
// on the same keep-alive client; its writes report an error instead.
func TestLateWritesStayInTheirRequest(t *testing.T) {
	forFallback(t, func(t *testing.T, fallback bool) {
		mw, err := resiliencegin.New(inbound.Options{
			Timeout:     50 * time.Millisecond,
			Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100},
		})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		lateErrs := make(chan error, 1)
		e := gin.New()
		e.ContextWithFallback = fallback
		e.GET("/plain/:n", func(c *gin.Context) { c.String(200, "plain "+c.Param("n")) })
		g := e.Group("/", mw.Handler)
		g.GET("/fast/:n", func(c *gin.Context) { c.String(200, "fast "+c.Param("n")) })
		g.GET("/slow", func(c *gin.Context) {
			<-c.Request.Context().Done()
			<-release // the client has its 504 by now
			c.Header("X-Late", "1")
			c.String(200, "LATE STRING")
			c.JSON(200, gin.H{"late": "json"})
			_, err := c.Writer.Write([]byte("LATE BYTES"))
			c.Writer.Flush()
			lateErrs <- err
		})
		ts := serveGin(t, e)
		want504 := timeoutBody(t, mw)

		for i := range 20 {
			code, body, h := ts.get(t, "/slow")
			if code != 504 || body != want504 || h.Get("X-Late") != "" {
				t.Fatalf("round %d: slow got %d %q (X-Late %q), want 504 %q", i, code, body, h.Get("X-Late"), want504)
			}
			var wg sync.WaitGroup
			wg.Go(func() { release <- struct{}{} })
			for j := range 3 {
				for _, p := range []string{"fast", "plain"} {
					n := fmt.Sprintf("%d-%d", i, j)
					code, body, _ := ts.get(t, "/"+p+"/"+n)
					if code != 200 || body != p+" "+n {
						t.Fatalf("round %d: /%s/%s got %d %q, want 200 %q", i, p, n, code, body, p+" "+n)
					}
				}
			}
			wg.Wait()
			if err := <-lateErrs; !errors.Is(err, http.ErrHandlerTimeout) {
				t.Fatalf("round %d: a late c.Writer.Write returned %v, want http.ErrHandlerTimeout", i, err)
			}
		}
		waitIdle(t, mw)
		if s := ts.log.String(); s != "" {
			t.Errorf("server log: %s", s)
		}
	})
}

// TestNoDoubleResponse: in gin's debug mode, behind gin's Recovery and an
// error-rendering middleware, none of these makes gin warn "Headers were
// already written" or net/http log "superfluous response.WriteHeader", and
// each gets the one response it should: late writes of every kind, a
// panic after the 504 (recovered by gin over HTTP/1; over HTTP/2, where
// the stream ended with the 504, logged as net/http logs a handler's
// panic; the permit returned), a status held
// then the deadline, an empty abort and a bare status in time, and a
// rejection.
func TestNoDoubleResponse(t *testing.T) {
	forFallback(t, func(t *testing.T, fallback bool) {
		ginLog := new(syncBuffer)
		oldOut, oldErr := gin.DefaultWriter, gin.DefaultErrorWriter
		gin.DefaultWriter, gin.DefaultErrorWriter = ginLog, ginLog
		gin.SetMode(gin.DebugMode)
		defer func() {
			gin.SetMode(gin.ReleaseMode)
			gin.DefaultWriter, gin.DefaultErrorWriter = oldOut, oldErr
		}()

		mw, err := resiliencegin.New(inbound.Options{
			Timeout:     50 * time.Millisecond,
			Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4},
		})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		recovered := make(chan any, 4)
		e := gin.New()
		e.ContextWithFallback = fallback
		e.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, rec any) {
			recovered <- rec
			c.AbortWithStatus(http.StatusInternalServerError)
		}))
		// The usual error renderer: a body for c.Errors when nothing was
		// written yet.
		e.Use(func(c *gin.Context) {
			c.Next()
			if len(c.Errors) > 0 && !c.Writer.Written() {
				c.JSON(500, gin.H{"error": "rendered by the error middleware"})
			}
		})
		e.Use(mw.Handler)
		e.GET("/late-everything", func(c *gin.Context) {
			<-c.Request.Context().Done()
			<-release
			c.Status(201)
			c.Header("X-Late", "1")
			c.Writer.WriteHeaderNow()
			c.JSON(200, gin.H{"late": true})
			c.AbortWithStatusJSON(418, gin.H{"late": "abort"})
			c.Writer.Flush()
			_ = c.Error(errors.New("late failure")) // the renderer must not write either
		})
		e.GET("/late-panic", func(c *gin.Context) {
			<-c.Request.Context().Done()
			<-release
			panic("late boom")
		})
		e.GET("/held-status", func(c *gin.Context) {
			c.Status(202)
			c.Writer.WriteHeaderNow() // held by the timed writer: the 504 still replaces it
			<-c.Request.Context().Done()
		})
		e.GET("/abort-empty", func(c *gin.Context) { _ = c.AbortWithError(401, errors.New("who are you")) })
		e.GET("/status-only", func(c *gin.Context) { c.Status(201) })
		e.GET("/in-time-error", func(c *gin.Context) { _ = c.Error(errors.New("failed")) })
		ts := serveGin(t, e)
		want504 := timeoutBody(t, mw)

		tests := []struct {
			path     string
			status   int
			body     string
			released bool // the handler waits for release after the 504
			panics   bool
		}{
			{"/late-everything", 504, want504, true, false},
			{"/late-panic", 504, want504, true, true},
			{"/held-status", 504, want504, false, false},
			{"/abort-empty", 401, "", false, false},
			{"/status-only", 201, "", false, false},
			{"/in-time-error", 500, `{"error":"rendered by the error middleware"}`, false, false},
		}
		for _, tc := range tests {
			t.Run(tc.path, func(t *testing.T) {
				code, body, _ := ts.get(t, tc.path)
				if code != tc.status || body != tc.body {
					t.Errorf("got %d %q, want %d %q", code, body, tc.status, tc.body)
				}
				if tc.released {
					release <- struct{}{}
				}
				if tc.panics && overHTTP2 {
					// The stream ended with the 504, before the panic: it is
					// logged as net/http logs a handler's, never recovered.
					waitLogged(t, ts.log, "panic serving", "after its 504: late boom")
				} else if tc.panics {
					select {
					case rec := <-recovered:
						if rec != "late boom" {
							t.Errorf("gin's Recovery got %v, want the handler's panic", rec)
						}
					case <-time.After(10 * time.Second):
						t.Fatal("gin's Recovery never got the panic after the 504")
					}
				}
				waitIdle(t, mw) // the permit came back, panic or not
			})
		}
		for _, bad := range []string{"Headers were already written", "superfluous", "panic serving"} {
			if s := ginLog.String(); strings.Contains(s, bad) {
				t.Errorf("gin logged %q:\n%s", bad, s)
			}
			s := ts.log.String()
			if overHTTP2 && bad == "panic serving" {
				s = strings.Replace(s, "panic serving", "", 1) // the late panic's, once
			}
			if strings.Contains(s, bad) {
				t.Errorf("net/http logged %q:\n%s", bad, s)
			}
		}
	})
}

// waitLogged waits (bounded) until log holds every one of want.
func waitLogged(t *testing.T, log *syncBuffer, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, all := log.String(), true
		for _, w := range want {
			all = all && strings.Contains(s, w)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log %q, want %q", s, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRejectionAbortsChain: a 429 and a 503 abort gin's chain (the route's
// handler and later middleware do not run), carry exactly the status,
// fields and body the net/http middleware sends for the same rejection,
// and are in c.Errors as the typed rejection for middleware further out.
func TestRejectionAbortsChain(t *testing.T) {
	forFallback(t, func(t *testing.T, fallback bool) {
		opts := inbound.Options{
			Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
			RateLimit: &resilience.RateLimiterOptions{PermitLimit: 2, Window: time.Hour,
				Key: func(ctx context.Context) string { return "one" }},
		}
		mw, err := resiliencegin.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		entered, release := make(chan struct{}), make(chan struct{})
		var mu sync.Mutex
		var seen []error
		ran := 0
		e := gin.New()
		e.ContextWithFallback = fallback
		e.Use(func(c *gin.Context) {
			c.Next()
			mu.Lock()
			defer mu.Unlock()
			for _, ge := range c.Errors {
				seen = append(seen, ge.Err)
			}
		})
		e.Use(mw.Handler)
		e.Use(func(c *gin.Context) { mu.Lock(); ran++; mu.Unlock() })
		e.GET("/hold", func(c *gin.Context) { entered <- struct{}{}; <-release })
		e.GET("/ok", func(c *gin.Context) { c.String(200, "ok") })
		ts := serveGin(t, e)

		held := make(chan int, 1)
		go func() {
			resp, err := ts.client.Get(ts.URL + "/hold")
			if err != nil {
				held <- 0
				return
			}
			resp.Body.Close()
			held <- resp.StatusCode
		}()
		<-entered

		// The same rejections through the plain net/http middleware.
		ref, err := adapt.New(adapt.Framework{}, opts)
		if err != nil {
			t.Fatal(err)
		}
		render := func(rej error) (int, http.Header, string) {
			resp, _ := ref.Render(rej)
			return resp.Status, resp.Header, string(resp.Body)
		}
		code, body, h := ts.get(t, "/ok") // rate limit left: 1 → 503 full
		wantCode, wantH, wantBody := render(&resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonFull})
		if code != wantCode || body != wantBody || h.Get("Content-Type") != wantH.Get("Content-Type") || h.Get("Content-Length") != fmt.Sprint(len(wantBody)) {
			t.Errorf("503: got %d %v %q, want %d %v %q", code, h, body, wantCode, wantH, wantBody)
		}
		code, body, h = ts.get(t, "/ok") // rate limit spent → 429
		if _, _, want429 := render(&resilience.RateLimitRejectedError{RetryAfter: time.Hour, Limit: 2}); code != 429 || body != want429 {
			t.Errorf("429: got %d %q, want 429 %q", code, body, want429)
		}
		for _, f := range []string{"Retry-After", "Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset"} {
			if h.Get(f) == "" {
				t.Errorf("429 without %s: %v", f, h)
			}
		}
		close(release)
		if c := <-held; c != 200 {
			t.Errorf("held request: %d, want 200", c)
		}
		waitIdle(t, mw)

		mu.Lock()
		defer mu.Unlock()
		if ran != 1 {
			t.Errorf("the middleware after the adapter ran %d times, want once (the held request only)", ran)
		}
		var rate *resilience.RateLimitRejectedError
		var bulk *resilience.ConcurrencyLimitRejectedError
		if len(seen) != 2 || !errors.As(seen[0], &bulk) || !errors.As(seen[1], &rate) {
			t.Errorf("c.Errors seen by the outer middleware: %v, want the 503's and the 429's rejections", seen)
		}
	})
}

// TestOuterMiddlewareAfterThe504: once the chain returns after a 504 (at
// the adapter's timeout, or at an upstream deadline under a custom
// pipeline), the middleware further out than the adapter sees the
// response as sent (status 504, written, the 504's size, as gin's Logger
// reads it), and whatever it writes then (c.String, c.Writer.Write, a
// flush) is dropped with http.ErrHandlerTimeout and a hijack is refused:
// the client gets the 504 alone, and net/http logs nothing.
func TestOuterMiddlewareAfterThe504(t *testing.T) {
	limiter, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 4})
	if err != nil {
		t.Fatal(err)
	}
	pipeline, err := resilience.NewBuilder[struct{}]().AddStrategy(limiter).Build()
	if err != nil {
		t.Fatal(err)
	}
	setups := []struct {
		name     string
		opts     inbound.Options
		upstream time.Duration // a deadline set by the outer middleware
		cause    error         // the 504's
	}{
		{"timeout", inbound.Options{Timeout: 30 * time.Millisecond}, 0, &resilience.TimeoutRejectedError{}},
		{"pipeline under an upstream deadline", inbound.Options{Pipeline: pipeline}, 30 * time.Millisecond, context.DeadlineExceeded},
	}
	for _, su := range setups {
		t.Run(su.name, func(t *testing.T) {
			forFallback(t, func(t *testing.T, fallback bool) {
				testOuterAfter504(t, fallback, su.opts, su.upstream, su.cause)
			})
		})
	}
}

func testOuterAfter504(t *testing.T, fallback bool, opts inbound.Options, upstream time.Duration, cause error) {
	mw, err := resiliencegin.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		status, size        int
		written             bool
		writeErr, hijackErr error
		errs                []string
	}
	got := make(chan seen, 1)
	e := gin.New()
	e.ContextWithFallback = fallback
	e.Use(func(c *gin.Context) {
		if upstream > 0 {
			ctx, cancel := context.WithTimeout(c.Request.Context(), upstream)
			defer cancel()
			c.Request = c.Request.WithContext(ctx)
		}
		c.Next()
		var s seen
		s.status, s.size, s.written = c.Writer.Status(), c.Writer.Size(), c.Writer.Written()
		c.String(http.StatusInternalServerError, "outer")
		_, s.writeErr = c.Writer.Write([]byte("more"))
		c.Writer.Flush()
		if conn, _, err := c.Writer.Hijack(); err == nil {
			conn.Close()
		} else {
			s.hijackErr = err
		}
		s.errs = c.Errors.Errors()
		got <- s
	})
	e.Use(mw.Handler)
	e.GET("/", func(c *gin.Context) { <-c.Request.Context().Done() })
	ts := serveGin(t, e)
	resp, ok := (&adapt.Kit{Middleware: mw.Inbound()}).Render(cause)
	if !ok {
		t.Fatal("no 504 rendered")
	}
	want504 := string(resp.Body)
	if code, body, _ := ts.get(t, "/"); code != http.StatusGatewayTimeout || body != want504 {
		t.Errorf("got %d %q, want 504 %q", code, body, want504)
	}
	s := <-got
	if s.status != http.StatusGatewayTimeout || !s.written || s.size != len(want504) {
		t.Errorf("outer middleware saw status %d, written %v, size %d; want 504, true, %d", s.status, s.written, s.size, len(want504))
	}
	if !errors.Is(s.writeErr, http.ErrHandlerTimeout) || !errors.Is(s.hijackErr, http.ErrHandlerTimeout) {
		t.Errorf("after the 504: Write returned %v, Hijack %v; want http.ErrHandlerTimeout", s.writeErr, s.hijackErr)
	}
	if len(s.errs) != 1 || s.errs[0] != http.ErrHandlerTimeout.Error() {
		t.Errorf("c.Errors after the outer c.String: %q, want its write's http.ErrHandlerTimeout", s.errs)
	}
	waitIdle(t, mw)
	if l := ts.log.String(); l != "" {
		t.Errorf("server log: %s", l)
	}
}
