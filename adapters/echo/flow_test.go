package resilienceecho_test

// echo reports errors by returning them to its HTTPErrorHandler, and keeps
// its own view of the response (Status, Size, Committed) in *echo.Response.
// These tests hold the adapter to that flow: rejections are returned, never
// written as well; after the 504 echo's Response reads committed, so
// Recover and the error handler write nothing more; Flush and Hijack keep
// working through the Response; ContextTimeout and Recover compose.

import (
	"bufio"
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

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/ylcnfrht/resilience/adapters/echo"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

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

type testServer struct {
	URL    string
	client *http.Client
	log    *syncBuffer // net/http's error log
}

// newEcho is an echo instance whose logger writes to the returned buffer.
func newEcho() (*echo.Echo, *syncBuffer) {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	out := new(syncBuffer)
	e.Logger.SetOutput(out)
	return e, out
}

// overHTTP2 makes serve speak HTTP/2 (h2c): set by TestOverHTTP2.
var overHTTP2 bool

func serve(t *testing.T, h http.Handler) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errLog := new(syncBuffer)
	srv := &http.Server{Handler: h, ErrorLog: log.New(errLog, "", 0), ReadHeaderTimeout: 10 * time.Second}
	tr := &http.Transport{}
	if overHTTP2 { // h2c on both ends
		srv.Protocols, tr.Protocols = new(http.Protocols), new(http.Protocols)
		srv.Protocols.SetUnencryptedHTTP2(true)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		<-done
	})
	return &testServer{URL: "http://" + ln.Addr().String(), client: &http.Client{Transport: tr}, log: errLog}
}

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

func waitIdle(t *testing.T, mw *resilienceecho.Middleware) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for st := mw.Stats(); st.InFlight != 0 || st.Queued != 0 || st.Late != 0; st = mw.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want nothing in flight, queued or late", st)
		}
		time.Sleep(time.Millisecond)
	}
}

func rendered(t *testing.T, mw *resilienceecho.Middleware, err error) inbound.Response {
	t.Helper()
	resp, ok := (&adapt.Kit{Middleware: mw.Inbound()}).Render(err)
	if !ok {
		t.Fatalf("nothing rendered for %v", err)
	}
	return resp
}

// rejectionSetup is a middleware with one permit and a rate limit of two,
// and an engine where /hold takes the permit until released.
func rejectionSetup(t *testing.T, e *echo.Echo) (mw *resilienceecho.Middleware, ts *testServer, release func(), ran *int) {
	t.Helper()
	mw, err := resilienceecho.New(inbound.Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 2, Window: time.Hour,
			Key: func(context.Context) string { return "one" }},
	})
	if err != nil {
		t.Fatal(err)
	}
	entered, rel := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	n := 0
	e.Use(mw.Handler)
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { mu.Lock(); n++; mu.Unlock(); return next(c) }
	})
	e.GET("/hold", func(c echo.Context) error { entered <- struct{}{}; <-rel; return c.String(200, "held") })
	e.GET("/ok", func(c echo.Context) error { return c.String(200, "ok") })
	ts = serve(t, e)
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
	return mw, ts, func() {
		close(rel)
		if c := <-held; c != 200 {
			t.Errorf("held request: %d, want 200", c)
		}
		waitIdle(t, mw)
	}, &n
}

// TestRejectionsThroughDefaultErrorHandler: with echo's own error handler
// a 503 and a 429 are byte for byte what the net/http middleware sends
// (status, fields, body and its length), the chain after the adapter does
// not run, and echo logs nothing.
func TestRejectionsThroughDefaultErrorHandler(t *testing.T) {
	e, echoLog := newEcho()
	mw, ts, release, ran := rejectionSetup(t, e)
	for _, tc := range []struct {
		name string
		want inbound.Response
	}{
		{"503 full", rendered(t, mw, &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonFull})},
		{"429", rendered(t, mw, &resilience.RateLimitRejectedError{RetryAfter: time.Hour, Limit: 2})},
	} {
		code, body, h := ts.get(t, "/ok")
		if code != tc.want.Status || body != string(tc.want.Body) || h.Get("Content-Length") != fmt.Sprint(len(tc.want.Body)) {
			t.Errorf("%s: got %d %q (Content-Length %s), want %d %q", tc.name, code, body, h.Get("Content-Length"), tc.want.Status, tc.want.Body)
		}
		for k := range tc.want.Header {
			if k == "Ratelimit-Reset" || k == "Retry-After" {
				if h.Get(k) == "" {
					t.Errorf("%s: %s missing", tc.name, k)
				}
				continue
			}
			if h.Get(k) != tc.want.Header.Get(k) {
				t.Errorf("%s: %s = %q, want %q", tc.name, k, h.Get(k), tc.want.Header.Get(k))
			}
		}
	}
	release()
	if *ran != 1 {
		t.Errorf("the middleware after the adapter ran %d times, want once (the held request)", *ran)
	}
	if s := echoLog.String(); s != "" {
		t.Errorf("echo logged: %s", s)
	}
}

// TestRejectionsThroughCustomErrorHandler: a custom HTTPErrorHandler
// receives each rejection as an *echo.HTTPError with the rendered status
// and the typed rejection inside, finds Retry-After already set, and its
// own format is the whole response: the adapter wrote nothing itself.
func TestRejectionsThroughCustomErrorHandler(t *testing.T) {
	e, _ := newEcho()
	var mu sync.Mutex
	var got []error
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		mu.Lock()
		got = append(got, err)
		mu.Unlock()
		var he *echo.HTTPError
		if !errors.As(err, &he) {
			_ = c.String(500, "not an HTTPError")
			return
		}
		_ = c.String(he.Code, fmt.Sprintf("problem %d retry=%q", he.Code, c.Response().Header().Get("Retry-After")))
	}
	_, ts, release, _ := rejectionSetup(t, e)
	if code, body, _ := ts.get(t, "/ok"); code != 503 || body != `problem 503 retry="1"` {
		t.Errorf("503: got %d %q", code, body)
	}
	code, body, h := ts.get(t, "/ok")
	if code != 429 || body != fmt.Sprintf("problem 429 retry=%q", h.Get("Retry-After")) || h.Get("Retry-After") == "" {
		t.Errorf("429: got %d %q (Retry-After %q)", code, body, h.Get("Retry-After"))
	}
	release()

	mu.Lock()
	defer mu.Unlock()
	var bulk *resilience.ConcurrencyLimitRejectedError
	var rate *resilience.RateLimitRejectedError
	if len(got) != 2 || !errors.As(got[0], &bulk) || !errors.As(got[1], &rate) {
		t.Fatalf("the error handler got %v, want the 503's and the 429's rejections", got)
	}
	if he := got[1].(*echo.HTTPError); he.Code != 429 || !errors.Is(he.Internal, resilience.ErrRateLimitRejected) {
		t.Errorf("429's HTTPError: code %d, internal %v", he.Code, he.Internal)
	}
}

// TestAfterThe504: once the adapter has sent the 504, echo's Response is
// committed with status 504 for the middleware further out; the late
// handler's writes fail and its returned error reaches no error handler;
// a panic after the 504 is recovered by middleware.Recover without a
// second response or a warning; a panic in time still gets echo's 500.
func TestAfterThe504(t *testing.T) {
	e, echoLog := newEcho()
	mw, err := resilienceecho.New(inbound.Options{
		Timeout:     50 * time.Millisecond,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	type outer struct {
		committed bool
		status    int
		err       error
	}
	seen := make(chan outer, 1)
	handled := make(chan error, 4)
	lateWrite := make(chan error, 1)
	recovered := make(chan error, 2)
	release := make(chan struct{})
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		handled <- err
		e.DefaultHTTPErrorHandler(err, c)
	}
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		LogErrorFunc: func(c echo.Context, err error, _ []byte) error { recovered <- err; return err },
	}))
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			if c.Path() == "/late" {
				seen <- outer{c.Response().Committed, c.Response().Status, err}
			}
			return err
		}
	})
	e.Use(mw.Handler)
	e.GET("/late", func(c echo.Context) error {
		<-c.Request().Context().Done()
		<-release
		lateWrite <- c.JSON(200, map[string]string{"late": "yes"})
		return errors.New("late failure")
	})
	e.GET("/late-panic", func(c echo.Context) error {
		<-c.Request().Context().Done()
		<-release
		panic("late boom")
	})
	e.GET("/panic", func(c echo.Context) error { panic("boom") })
	ts := serve(t, e)
	want504 := string(rendered(t, mw, &resilience.TimeoutRejectedError{}).Body)

	if code, body, _ := ts.get(t, "/late"); code != 504 || body != want504 {
		t.Errorf("/late: %d %q, want 504 %q", code, body, want504)
	}
	release <- struct{}{}
	if err := <-lateWrite; !errors.Is(err, http.ErrHandlerTimeout) {
		t.Errorf("late c.JSON returned %v, want http.ErrHandlerTimeout", err)
	}
	if o := <-seen; !o.committed || o.status != 504 || o.err != nil {
		t.Errorf("outer middleware saw committed %v, status %d, error %v; want true, 504, nil", o.committed, o.status, o.err)
	}

	if code, body, _ := ts.get(t, "/late-panic"); code != 504 || body != want504 {
		t.Errorf("/late-panic: %d %q, want 504 %q", code, body, want504)
	}
	release <- struct{}{}
	if err := <-recovered; err == nil || !strings.Contains(err.Error(), "late boom") {
		t.Errorf("Recover got %v, want the late panic", err)
	}
	waitIdle(t, mw)

	if code, body, _ := ts.get(t, "/panic"); code != 500 || body != "{\"message\":\"Internal Server Error\"}\n" {
		t.Errorf("/panic: %d %q, want echo's 500", code, body)
	}
	<-recovered
	waitIdle(t, mw)

	// Only the two panics reached the error handler (through Recover);
	// the late handler's error did not.
	for i := range 2 {
		select {
		case err := <-handled:
			if strings.Contains(err.Error(), "late failure") {
				t.Errorf("the error handler got the late handler's error")
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the error handler ran %d times, want 2 (the recovered panics)", i)
		}
	}
	select {
	case err := <-handled:
		t.Errorf("the error handler ran a third time, with %v", err)
	default:
	}
	for _, bad := range []string{"committed", "superfluous"} {
		if strings.Contains(echoLog.String(), bad) || strings.Contains(ts.log.String(), bad) {
			t.Errorf("logged %q:\necho: %s\nnet/http: %s", bad, echoLog, ts.log)
		}
	}
}

// TestContextTimeoutInChain: echo's ContextTimeout composes with the
// adapter either way round. Outside it with a shorter timeout, its
// deadline is the request's: the adapter's 504 comes at it (with the
// adapter's own timeout or only a custom pipeline's), and a late handler's
// context error does not become a second response. Inside, the
// handler's context error becomes ContextTimeout's 503, returned through
// the adapter to echo's error handler.
func TestContextTimeoutInChain(t *testing.T) {
	ignore := func(c echo.Context) error {
		<-c.Request().Context().Done()
		time.Sleep(5 * time.Millisecond)
		return nil
	}
	watch := func(c echo.Context) error { <-c.Request().Context().Done(); return c.Request().Context().Err() }
	opts := inbound.Options{Timeout: 10 * time.Second, Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4}}

	t.Run("outside", func(t *testing.T) {
		e, echoLog := newEcho()
		mw, err := resilienceecho.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		e.Use(middleware.ContextTimeout(50 * time.Millisecond))
		e.Use(mw.Handler)
		e.GET("/", ignore)
		// Late, and returning its context's error, which ContextTimeout
		// turns into its 503 unless the adapter reports the 504 as the
		// response.
		e.GET("/late-error", func(c echo.Context) error { _ = ignore(c); return c.Request().Context().Err() })
		ts := serve(t, e)
		want := string(rendered(t, mw, &resilience.TimeoutRejectedError{}).Body)
		for _, path := range []string{"/", "/late-error"} {
			start := time.Now()
			if code, body, _ := ts.get(t, path); code != 504 || body != want {
				t.Errorf("%s: got %d %q, want 504 %q", path, code, body, want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s: the 504 took %v: the outer deadline was not the request's", path, d)
			}
			waitIdle(t, mw)
		}
		for _, bad := range []string{"committed", "superfluous"} {
			if strings.Contains(echoLog.String(), bad) || strings.Contains(ts.log.String(), bad) {
				t.Errorf("logged %q:\necho: %s\nnet/http: %s", bad, echoLog, ts.log)
			}
		}
	})
	t.Run("outside, custom pipeline", func(t *testing.T) {
		// No Options.Timeout: the request's own deadline (ContextTimeout's)
		// is the only one, so the handler's context ends with
		// context.DeadlineExceeded, and the adapter's 504 answers it.
		limiter, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 4})
		if err != nil {
			t.Fatal(err)
		}
		p, err := resilience.NewBuilder[struct{}]().AddStrategy(limiter).Build()
		if err != nil {
			t.Fatal(err)
		}
		e, echoLog := newEcho()
		mw, err := resilienceecho.New(inbound.Options{Pipeline: p})
		if err != nil {
			t.Fatal(err)
		}
		e.Use(middleware.ContextTimeout(50 * time.Millisecond))
		e.Use(mw.Handler)
		e.GET("/", func(c echo.Context) error { _ = ignore(c); return c.Request().Context().Err() })
		ts := serve(t, e)
		want := string(rendered(t, mw, context.DeadlineExceeded).Body)
		if code, body, _ := ts.get(t, "/"); code != 504 || body != want {
			t.Errorf("got %d %q, want 504 %q", code, body, want)
		}
		waitIdle(t, mw)
		for _, bad := range []string{"committed", "superfluous"} {
			if strings.Contains(echoLog.String(), bad) || strings.Contains(ts.log.String(), bad) {
				t.Errorf("logged %q:\necho: %s\nnet/http: %s", bad, echoLog, ts.log)
			}
		}
	})
	t.Run("inside", func(t *testing.T) {
		e, _ := newEcho()
		mw, err := resilienceecho.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		e.Use(mw.Handler)
		e.Use(middleware.ContextTimeout(50 * time.Millisecond))
		e.GET("/", watch)
		ts := serve(t, e)
		if code, body, _ := ts.get(t, "/"); code != 503 || body != "{\"message\":\"Service Unavailable\"}\n" {
			t.Errorf("got %d %q, want ContextTimeout's 503", code, body)
		}
		waitIdle(t, mw)
	})
}

// TestFlushAndHijackThroughResponse: c.Response().Flush works through the
// adapter (echo panics when its writer cannot flush) and commits at once;
// c.Response().Hijack hands over the connection, then no 504 comes.
func TestFlushAndHijackThroughResponse(t *testing.T) {
	e, _ := newEcho()
	mw, err := resilienceecho.New(inbound.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	flushed := make(chan struct{})
	e.Use(mw.Handler)
	e.GET("/flush", func(c echo.Context) error {
		_, _ = c.Response().Write([]byte("first"))
		c.Response().Flush()
		<-flushed
		_, err := c.Response().Write([]byte(" second"))
		return err
	})
	e.GET("/hijack", func(c echo.Context) error {
		conn, rw, err := c.Response().Hijack()
		if err != nil {
			return err
		}
		defer conn.Close()
		time.Sleep(300 * time.Millisecond) // past the timeout
		_, _ = rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		return rw.Flush()
	})
	ts := serve(t, e)

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
	if code, body, _ := ts.get(t, "/hijack"); code != 200 || body != "hijacked" {
		t.Errorf("hijacked: %d %q", code, body)
	}
	waitIdle(t, mw)
}

// TestContextAndRoute: priority and key functions get the echo.Context
// through resilienceecho.Context, and Request.Route in chi's format from
// echo's pattern.
func TestContextAndRoute(t *testing.T) {
	type seen struct{ route, path, param string }
	var mu sync.Mutex
	got := map[string]seen{}
	key := func(ctx context.Context) string {
		r, _ := inbound.RequestFrom(ctx)
		c, ok := resilienceecho.Context(ctx)
		if !ok {
			t.Error("resilienceecho.Context: no echo.Context in a key function's context")
			return ""
		}
		mu.Lock()
		got[c.Request().URL.Path] = seen{r.Route(), c.Path(), c.Param("id")}
		mu.Unlock()
		return "k"
	}
	mw, err := resilienceecho.New(inbound.Options{
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1 << 20, Window: time.Hour, Key: key},
	})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := newEcho()
	ok := func(c echo.Context) error { return c.NoContent(200) }
	api := e.Group("/api", mw.Handler)
	api.GET("/users/:id", ok)
	api.GET("/users/:id/files/*", ok)
	api.GET("/static", ok)
	ts := serve(t, e)
	for _, tc := range []struct{ path, route, id string }{
		{"/api/users/7", "/api/users/{id}", "7"},
		{"/api/users/7/files/a/b.txt", "/api/users/{id}/files/*", "7"},
		{"/api/static", "/api/static", ""},
	} {
		if code, _, _ := ts.get(t, tc.path); code != 200 {
			t.Fatalf("%s: %d", tc.path, code)
		}
		mu.Lock()
		s := got[tc.path]
		mu.Unlock()
		if s.route != tc.route || s.param != tc.id {
			t.Errorf("%s: Route %q, id %q (echo's %q); want %q, %q", tc.path, s.route, s.param, s.path, tc.route, tc.id)
		}
	}
	if _, ok := resilienceecho.Context(context.Background()); ok {
		t.Error("resilienceecho.Context found an echo.Context in an empty context")
	}
}

// TestNoRaceOnEchoContext: under -race, many requests whose deadlines fire
// while the handler sets a header field and writes through c.Response()
// in a loop and an inner middleware reads the Response: nothing the
// deadline does touches the pooled echo.Context, its Response or the
// handler's header map, and every answer is whole (a 504 carries none of
// the handler's fields).
func TestNoRaceOnEchoContext(t *testing.T) {
	e, _ := newEcho()
	mw, err := resilienceecho.New(inbound.Options{
		Timeout:     5 * time.Millisecond,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 64, QueueLimit: 64, QueueTimeout: 10 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Use(middleware.Recover())
	e.Use(mw.Handler)
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set("k", c.Response().Status)
			err := next(c)
			_ = c.Response().Committed
			return err
		}
	})
	e.GET("/w/:n", func(c echo.Context) error {
		for i := 0; i < 5000; i++ {
			c.Response().Header().Set("X-N", c.Param("n")) // while the deadline may be writing the 504's fields
			if _, err := c.Response().Write([]byte("x")); err != nil {
				return err
			}
			if i%64 == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
		return nil
	})
	ts := serve(t, e)
	want504 := string(rendered(t, mw, &resilience.TimeoutRejectedError{}).Body)
	var wg sync.WaitGroup
	for i := range 48 {
		wg.Go(func() {
			resp, err := ts.client.Get(fmt.Sprintf("%s/w/%d", ts.URL, i))
			if err != nil {
				return // committed and cut at the deadline
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
}

// TestUpstreamDeadlineWithoutTimeout: without Options.Timeout nothing in
// the adapter answers a deadline, so when an outer ContextTimeout's
// deadline passes, the handler's own answer stands: here its context
// error, which ContextTimeout turns into its 503.
func TestUpstreamDeadlineWithoutTimeout(t *testing.T) {
	e, _ := newEcho()
	mw, err := resilienceecho.New(inbound.Options{Adaptive: &resilience.AdaptiveLimiterOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	e.Use(middleware.ContextTimeout(30 * time.Millisecond))
	e.Use(mw.Handler)
	e.GET("/", func(c echo.Context) error { <-c.Request().Context().Done(); return c.Request().Context().Err() })
	ts := serve(t, e)
	if code, body, _ := ts.get(t, "/"); code != 503 || body != "{\"message\":\"Service Unavailable\"}\n" {
		t.Errorf("got %d %q, want ContextTimeout's 503", code, body)
	}
	waitIdle(t, mw)
}
