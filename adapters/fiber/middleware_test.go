package resiliencefiber_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	resiliencefiber "github.com/ylcnfrht/resilience/adapters/fiber"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// serve starts app on loopback with fiber's own server and returns its
// base URL; the server is shut down when the test ends.
func serve(t *testing.T, app *fiber.App) string {
	t.Helper()
	s, err := listen(app, func() inbound.Stats { return inbound.Stats{} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.URL
}

// rawConn is one keep-alive connection on which requests are sent one
// after another, so that fasthttp serves them with the same RequestCtx
// and the same buffers.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, url string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// rawGet sends a request written byte for byte on conn and returns the
// status.
func (rc *rawConn) rawGet(headerLines string) int {
	rc.t.Helper()
	if _, err := io.WriteString(rc.c, "GET / HTTP/1.1\r\nHost: x\r\n"+headerLines+"\r\n"); err != nil {
		rc.t.Fatal(err)
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		rc.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// keepingStore is a rate-limit store that keeps the keys it is given as
// they are, as a store may: the ratelimit.Store contract does not ask for a
// copy.
type keepingStore struct {
	mu     sync.Mutex
	counts map[string]int
}

func (s *keepingStore) Take(_ context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.counts[key]
	if n >= p.Limit {
		return ratelimit.Decision{Limit: p.Limit, Reset: p.Window, RetryAfter: p.Window, Policy: p}, nil
	}
	s.counts[key] = n + 1
	return ratelimit.Decision{Allowed: true, Limit: p.Limit, Remaining: p.Limit - n - 1, Reset: p.Window, Policy: p}, nil
}

// TestRateLimitKeyCopied: a key function may return a string backed by
// fasthttp's request buffers (fiber's c.Get does), and a store may keep
// the keys it gets, so the middleware copies them. Without the copy, the
// key kept for tenant-a is overwritten by the next request on the
// connection (here by another header that now comes first), and tenant-a's
// spent quota is forgotten.
func TestRateLimitKeyCopied(t *testing.T) {
	run := func(t *testing.T) (second int) {
		mw, err := resiliencefiber.New(inbound.Options{
			RateLimit: &resilience.RateLimiterOptions{
				PermitLimit: 1, Window: time.Hour,
				Store: &keepingStore{counts: map[string]int{}},
				Key: func(ctx context.Context) string {
					c, _ := resiliencefiber.CtxFrom(ctx)
					return c.Get("X-Tenant") // zero-copy: fasthttp's buffer
				},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		app.Use(mw.Handler)
		app.Get("/", func(c *fiber.Ctx) error { return c.SendString("ok") })
		conn := dial(t, serve(t, app))
		if st := conn.rawGet("X-Tenant: tenant-a\r\n"); st != 200 {
			t.Fatalf("tenant-a's first request: %d, want 200", st)
		}
		return conn.rawGet("X-Other: zzzzzzzz\r\nX-Tenant: tenant-a\r\n")
	}
	t.Run("copied", func(t *testing.T) {
		if st := run(t); st != http.StatusTooManyRequests {
			t.Errorf("tenant-a's second request: %d, want 429 (its quota of 1 is spent)", st)
		}
	})
	t.Run("without the copy", func(t *testing.T) {
		defer resiliencefiber.SetCloneKey(func(s string) string { return s })()
		if st := run(t); st != http.StatusOK {
			t.Errorf("tenant-a's second request without the key copy: %d; the test expects the reused buffer to have "+
				"changed the stored key (200), showing what the copy protects", st)
		}
	})
}

// viewValues are the strings a function read from the request view, kept
// as they were returned (no concatenation, which would copy them).
type viewValues struct{ method, path, get, value string }

func keepView(ctx context.Context) viewValues {
	v, _ := inbound.RequestFrom(ctx)
	vs := v.Header.Values("X-Tenant")
	if len(vs) == 0 {
		vs = []string{""}
	}
	return viewValues{v.Method, v.Path, v.Header.Get("X-Tenant"), vs[0]}
}

// TestViewValuesKept: what a key function and a priority function read
// from the view (method, path, header values) and keep stays as it was
// after later requests on the same connection reuse fasthttp's buffers.
// Each round, connection A holds the only permit so that connection B's
// request queues and the priority function runs; B's three requests are
// served by one RequestCtx, with values of equal length, so a string left
// pointing into its buffers would read as a later request's.
func TestViewValuesKept(t *testing.T) {
	var mu sync.Mutex
	var keyed, prioritized []viewValues
	mw, err := resiliencefiber.New(inbound.Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{
			PermitLimit: 1, QueueLimit: 10, QueueTimeout: time.Minute,
			Priority: func(ctx context.Context) int {
				mu.Lock()
				prioritized = append(prioritized, keepView(ctx))
				mu.Unlock()
				return 0
			},
		},
		RateLimit: &resilience.RateLimiterOptions{
			PermitLimit: 1000, Window: time.Hour,
			Key: func(ctx context.Context) string {
				if v, _ := inbound.RequestFrom(ctx); v.Path != "/hold" {
					mu.Lock()
					keyed = append(keyed, keepView(ctx))
					mu.Unlock()
				}
				return "k"
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	methods := []string{"ALPHA", "BRAVO", "CHAIN"} // not fiber's constants: the view copies them
	app := fiber.New(fiber.Config{DisableStartupMessage: true, RequestMethods: append(fiber.DefaultMethods, methods...)})
	entered, hold := make(chan struct{}), make(chan struct{})
	app.Use(mw.Handler)
	app.Get("/hold", func(c *fiber.Ctx) error {
		entered <- struct{}{}
		<-hold
		return c.SendString("ok")
	})
	app.All("/items/*", func(c *fiber.Ctx) error { return c.SendString("ok") })
	url := serve(t, app)
	a, b := dial(t, url), dial(t, url)
	var want []viewValues
	for i, tenant := range []string{"aaaa", "bbbb", "cccc"} {
		held := make(chan error, 1)
		go func() { held <- a.send("GET", "/hold", "") }()
		<-entered
		queued := make(chan error, 1)
		go func() { queued <- b.send(methods[i], "/items/"+tenant, "X-Tenant: "+tenant+"\r\n") }()
		for deadline := time.Now().Add(10 * time.Second); mw.Stats().Queued != 1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: B's request never queued", i)
			}
		}
		hold <- struct{}{}
		for _, ch := range []chan error{held, queued} {
			if err := <-ch; err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		want = append(want, viewValues{methods[i], "/items/" + tenant, tenant, tenant})
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(keyed) != fmt.Sprint(want) {
		t.Errorf("values the key function kept: %q, want %q", keyed, want)
	}
	if fmt.Sprint(prioritized) != fmt.Sprint(want) {
		t.Errorf("values the priority function kept: %q, want %q", prioritized, want)
	}
}

// send writes a request byte for byte and reads a 200 answer; it reports
// instead of failing the test, so that it may run on another goroutine.
func (rc *rawConn) send(method, path, headerLines string) error {
	if _, err := io.WriteString(rc.c, method+" "+path+" HTTP/1.1\r\nHost: x\r\n"+headerLines+"\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d", method, path, resp.StatusCode)
	}
	return nil
}

// TestRoute: the route a key function sees is fiber's route pattern in the
// neutral format (chi's: "{name}" for a parameter, "*" for a wildcard)
// when the middleware is part of the route, read as fiber's own parser
// reads it: parameters inside a segment, constraints, the optional mark,
// escapes; under app.Use or a Group fiber has not chosen the route yet and
// it is "".
func TestRoute(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	mw, err := resiliencefiber.New(inbound.Options{
		RateLimit: &resilience.RateLimiterOptions{
			PermitLimit: 1000, Window: time.Hour,
			Key: func(ctx context.Context) string {
				v, _ := inbound.RequestFrom(ctx)
				mu.Lock()
				seen[v.Path] = v.Route()
				mu.Unlock()
				return "k"
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(c *fiber.Ctx) error { return c.SendString(c.Params("id") + c.Params("*")) }
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/users/:id", mw.Handler, ok)
	app.Get("/files/*", mw.Handler, ok)
	app.Get("/opt/:name?", mw.Handler, ok)
	app.Get("/num/:n<int>", mw.Handler, ok)
	app.Get("/flights/:from-:to", mw.Handler, ok)
	app.Get("/dl/:file.:ext", mw.Handler, ok)
	app.Get("/shop/color::color", mw.Handler, ok)
	app.Get("/rpc/name\\:verb", mw.Handler, ok)
	app.Get("/two/*/and/+", mw.Handler, ok)
	app.Get("/re/:code<regex(a-[0-9]+)>/x", mw.Handler, ok)
	app.Get("/range/:n<range(1,5)>?", mw.Handler, ok)
	grouped := app.Group("/v2")
	grouped.Get("/items/:id", mw.Handler, ok) // in the route, under a prefix
	api := app.Group("/api", mw.Handler)
	api.Get("/items/:id", ok)
	url := serve(t, app)
	for path, want := range map[string]string{
		"/users/42":        "/users/{id}",
		"/files/a/b.css":   "/files/*",
		"/opt/x":           "/opt/{name}",
		"/num/7":           "/num/{n}",
		"/flights/LAX-SFO": "/flights/{from}-{to}",
		"/dl/a.txt":        "/dl/{file}.{ext}",
		"/shop/color:blue": "/shop/color:{color}",
		"/rpc/name:verb":   "/rpc/name:verb",
		"/two/a/and/b":     "/two/*/and/*",
		"/re/a-12/x":       "/re/{code}/x",
		"/range/3":         "/range/{n}",
		"/v2/items/5":      "/v2/items/{id}",
		"/api/items/9":     "", // group middleware: the route is not chosen yet
	} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		mu.Lock()
		got, ran := seen[path]
		mu.Unlock()
		if !ran || got != want {
			t.Errorf("GET %s: key function saw route %q (ran %v), want %q", path, got, ran, want)
		}
	}
}

// answer is a response as the tests compare it.
type answer struct {
	status int
	header http.Header
	body   string
	close  bool // the server closes the connection after it
}

func get(t *testing.T, url string, header map[string]string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, readBody(t, resp), resp.Close}
}

// rejections runs one sequence against a server whose /hold route waits
// for hold: a 503 (the only permit held) and a 429 (client c's third
// request within its quota of 2).
func rejections(t *testing.T, url string, entered, hold chan struct{}) (full, limited answer) {
	done := make(chan answer, 1)
	go func() { done <- get(t, url+"/hold", map[string]string{"X-Client": "a"}) }()
	<-entered
	full = get(t, url+"/x", map[string]string{"X-Client": "b"})
	hold <- struct{}{}
	if a := <-done; a.status != 200 {
		t.Fatalf("held request: %+v", a)
	}
	for i := 0; i < 2; i++ {
		if a := get(t, url+"/x", map[string]string{"X-Client": "c"}); a.status != 200 {
			t.Fatalf("request %d of client c: %+v", i, a)
		}
	}
	limited = get(t, url+"/x", map[string]string{"X-Client": "c"})
	return full, limited
}

func rejectionOptions() inbound.Options {
	return inbound.Options{
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
		RateLimit:   &resilience.RateLimiterOptions{PermitLimit: 2, Window: time.Hour, Key: by.Header("X-Client")},
	}
}

// sameAnswer compares a fiber answer with net/http's: status, body bytes
// and every header field but Date (Retry-After and RateLimit-Reset may
// differ by the second that passed between the runs).
func sameAnswer(t *testing.T, what string, got, want answer) {
	t.Helper()
	if got.status != want.status || got.body != want.body {
		t.Errorf("%s: fiber %d %q, net/http %d %q", what, got.status, got.body, want.status, want.body)
	}
	for _, h := range []http.Header{got.header, want.header} {
		for _, k := range []string{"Date", "Retry-After", "Ratelimit-Reset"} {
			h.Del(k)
		}
	}
	if fmt.Sprint(got.header) != fmt.Sprint(want.header) {
		t.Errorf("%s: fiber headers %v, net/http %v", what, got.header, want.header)
	}
}

// TestRejectionsMatchNetHTTP: with fiber's default ErrorHandler (which
// answers errors as text/plain), a rejection reaches the client with the
// status, headers and JSON body of the net/http middleware.
func TestRejectionsMatchNetHTTP(t *testing.T) {
	entered, hold := make(chan struct{}), make(chan struct{})
	wantFull, wantLimited := netHTTPRejections(t, entered, hold)

	mw, err := resiliencefiber.New(rejectionOptions())
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(mw.Handler)
	app.Get("/hold", func(c *fiber.Ctx) error {
		entered <- struct{}{}
		<-hold
		return c.SendString("ok")
	})
	app.Get("/x", func(c *fiber.Ctx) error { return c.SendString("ok") })
	gotFull, gotLimited := rejections(t, serve(t, app), entered, hold)
	sameAnswer(t, "503 full", gotFull, wantFull)
	sameAnswer(t, "429", gotLimited, wantLimited)
	if gotFull.status != 503 || gotLimited.status != 429 || gotLimited.header.Get("Ratelimit-Limit") != "2" {
		t.Errorf("unexpected reference answers: %+v, %+v", gotFull, gotLimited)
	}
}

// TestCustomErrorHandler: an app with its own ErrorHandler receives the
// rejection as an error: errors.As finds the *fiber.Error with the status
// and the inbound cause, and the handler decides the response (here: the
// default one, plus a field of its own).
func TestCustomErrorHandler(t *testing.T) {
	type seen struct {
		code   int
		reason resilience.RejectReason
		text   string
	}
	got := make(chan seen, 1)
	mw, err := resiliencefiber.New(rejectionOptions())
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{
		DisableStartupMessage: true,
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			var fe *fiber.Error
			var bulk *resilience.ConcurrencyLimitRejectedError
			var rej *resiliencefiber.Rejection
			if errors.As(err, &fe) && errors.As(err, &bulk) && errors.As(err, &rej) {
				got <- seen{fe.Code, bulk.Reason, err.Error()}
				c.Set("X-Handled-By", "app")
				return rej.Send(c)
			}
			return fiber.DefaultErrorHandler(c, err)
		},
	})
	entered, hold := make(chan struct{}), make(chan struct{})
	app.Use(mw.Handler)
	app.Get("/hold", func(c *fiber.Ctx) error {
		entered <- struct{}{}
		<-hold
		return c.SendString("ok")
	})
	app.Get("/x", func(c *fiber.Ctx) error { return c.SendString("ok") })
	app.Get("/missing", func(c *fiber.Ctx) error { return fiber.ErrNotFound })
	url := serve(t, app)
	defer http.DefaultClient.CloseIdleConnections()
	full, _ := rejections(t, url, entered, hold)
	if full.status != 503 || full.header.Get("X-Handled-By") != "app" || !strings.Contains(full.body, `"reason":"full"`) {
		t.Errorf("503 through the custom ErrorHandler: %+v", full)
	}
	s := <-got
	if s.code != 503 || s.reason != resilience.ReasonFull || s.text != "Service Unavailable" {
		t.Errorf("the ErrorHandler saw %+v", s)
	}
	// A handler's own error passes through the middleware unchanged.
	if a := get(t, url+"/missing", map[string]string{"X-Client": "d"}); a.status != 404 {
		t.Errorf("handler's own fiber.ErrNotFound: %+v", a)
	}
}

// TestTimeoutWithoutServeOnTime pins what the middleware does without
// ServeOnTime: at the deadline the handler's context ends, but fiber only
// sends a response when the handler returns, so the 504 comes then; until
// then the handler keeps its permit. The headers it set do not leak into
// the 504.
func TestTimeoutWithoutServeOnTime(t *testing.T) {
	mw, err := resiliencefiber.New(inbound.Options{
		Timeout:     100 * time.Millisecond,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	entered, ctxEnded, hold := make(chan struct{}), make(chan error, 1), make(chan struct{})
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(mw.Handler)
	app.Get("/slow", func(c *fiber.Ctx) error {
		ctx := c.UserContext()
		c.Set("X-Late", "yes")
		close(entered)
		<-ctx.Done()
		ctxEnded <- ctx.Err()
		<-hold // ignores its deadline from here on
		return c.SendString("late")
	})
	app.Get("/x", func(c *fiber.Ctx) error { return c.SendString("ok") })
	url := serve(t, app)
	defer http.DefaultClient.CloseIdleConnections()

	slow := make(chan answer, 1)
	go func() { slow <- get(t, url+"/slow", nil) }()
	<-entered
	if err := <-ctxEnded; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the handler's context ended with %v, want context.DeadlineExceeded", err)
	}
	// The handler is held, so nothing can have been sent yet; its permit
	// is still taken.
	select {
	case a := <-slow:
		t.Fatalf("answered while the handler was still running: %+v", a)
	default:
	}
	if st := mw.Stats(); st.InFlight != 1 {
		t.Errorf("stats past the deadline: %+v, want InFlight 1", st)
	}
	if a := get(t, url+"/x", nil); a.status != 503 {
		t.Errorf("request while the late handler holds the permit: %+v, want 503", a)
	}
	close(hold)
	a := <-slow
	if a.status != 504 || !strings.Contains(a.body, `"code":"TIMEOUT"`) || a.header.Get("X-Late") != "" {
		t.Errorf("answer once the handler returned: %+v, want the 504 TIMEOUT without X-Late", a)
	}
	if a := get(t, url+"/x", nil); a.status != 200 {
		t.Errorf("request after the permit came back: %+v", a)
	}
}

// TestOnTimeHandlerPanic: without a deadline, a panic in the app reaches
// the connection's goroutine with its value, as without the wrapper.
func TestOnTimeHandlerPanic(t *testing.T) {
	h := resiliencefiber.OnTimeHandler(func(*fasthttp.RequestCtx) { panic("boom") })
	defer func() {
		if p := recover(); p != "boom" {
			t.Errorf("recovered %v, want the handler's panic value", p)
		}
	}()
	h(new(fasthttp.RequestCtx))
	t.Error("the panic did not reach the caller")
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOnTime504: with ServeOnTime, a handler that ignores its deadline
// gets its client a complete 504 at the deadline, with the RateLimit
// fields the admitted request had (as in net/http) and none of the
// handler's own; the handler keeps its permit, counted late, until it
// returns.
func TestOnTime504(t *testing.T) {
	mw, err := resiliencefiber.New(inbound.Options{
		Timeout:     100 * time.Millisecond,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
		RateLimit:   &resilience.RateLimiterOptions{PermitLimit: 10, Window: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	hold, returned := make(chan struct{}), make(chan struct{})
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/slow", mw.Handler, func(c *fiber.Ctx) error {
		defer close(returned)
		c.Set("X-Late", "yes")
		<-hold // ignores its deadline
		return c.SendString("late")
	})
	resiliencefiber.ServeOnTime(app)
	url := serve(t, app)
	defer http.DefaultClient.CloseIdleConnections()

	a := get(t, url+"/slow", nil) // returns at the deadline: the handler is held
	if a.status != 504 || !strings.Contains(a.body, `"code":"TIMEOUT"`) || a.header.Get("X-Late") != "" ||
		a.header.Get("Ratelimit-Remaining") != "9" || !a.close {
		t.Errorf("answer at the deadline: %+v; want the 504 with RateLimit fields, Connection: close, without X-Late", a)
	}
	if st := mw.Stats(); st.InFlight != 1 || st.Late != 1 {
		t.Errorf("stats after the 504: %+v, want the late handler in flight", st)
	}
	close(hold)
	<-returned
	for deadline := time.Now().Add(10 * time.Second); mw.Stats().InFlight != 0 || mw.Stats().Late != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("stats after the handler returned: %+v", mw.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCancelledContextGetsNoResponse: a request whose context was
// cancelled before it got a permit (by middleware in front: fasthttp
// itself never cancels it) is not answered, as in net/http: the
// connection is closed without a response.
func TestCancelledContextGetsNoResponse(t *testing.T) {
	mw, err := resiliencefiber.New(inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(func(c *fiber.Ctx) error {
		ctx, cancel := context.WithCancel(c.UserContext())
		cancel()
		c.SetUserContext(ctx)
		return c.Next()
	})
	app.Get("/", mw.Handler, func(c *fiber.Ctx) error { return c.SendString("ran") })
	conn := dial(t, serve(t, app))
	if _, err := io.WriteString(conn.c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(conn.br, nil); err == nil {
		t.Errorf("got a response (%d) for a cancelled request; want the connection closed without one", resp.StatusCode)
	}
}

// TestOnTime504Head: the 504 ServeOnTime sends at the deadline to a HEAD
// request has no body, as every HEAD response (and net/http's 504): the
// connection carries the status and header fields, then closes. fasthttp
// sends the response given to TimeoutErrorWithResponse on a fresh
// RequestCtx that does not know the request was a HEAD, so the middleware
// must say so.
func TestOnTime504Head(t *testing.T) {
	mw, err := resiliencefiber.New(inbound.Options{Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	defer close(hold)
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/slow", mw.Handler, func(c *fiber.Ctx) error {
		<-hold // ignores its deadline
		return c.SendString("late")
	})
	resiliencefiber.ServeOnTime(app)
	conn := dial(t, serve(t, app))
	if _, err := io.WriteString(conn.c, "HEAD /slow HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(conn.br) // the 504 closes the connection
	if err != nil {
		t.Fatal(err)
	}
	head, rest, ok := strings.Cut(string(raw), "\r\n\r\n")
	if !ok || !strings.HasPrefix(head, "HTTP/1.1 504 ") || rest != "" {
		t.Errorf("answer to HEAD at the deadline: %q; want a 504 status line and header fields, then nothing", raw)
	}
}

// TestCustomErrorHandlerKeepsRejectionFields: an ErrorHandler of the app's
// own that writes its own body (here fiber's DefaultErrorHandler behind a
// wrapper, as a logging one would be) still sends the rejection's status
// with the fields a client needs to come back: Retry-After and the
// RateLimit fields of a 429, as net/http's. The body and its Content-Type
// are the handler's.
func TestCustomErrorHandlerKeepsRejectionFields(t *testing.T) {
	entered, hold := make(chan struct{}), make(chan struct{})
	_, want := netHTTPRejections(t, entered, hold)

	mw, err := resiliencefiber.New(rejectionOptions())
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan error, 2)
	app := fiber.New(fiber.Config{
		DisableStartupMessage: true,
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			handled <- err
			return fiber.DefaultErrorHandler(c, err)
		},
	})
	app.Use(mw.Handler)
	app.Get("/hold", func(c *fiber.Ctx) error {
		entered <- struct{}{}
		<-hold
		return c.SendString("ok")
	})
	app.Get("/x", func(c *fiber.Ctx) error { return c.SendString("ok") })
	full, got := rejections(t, serve(t, app), entered, hold)
	if got.status != 429 || got.body != "Too Many Requests" || !strings.HasPrefix(got.header.Get("Content-Type"), "text/plain") {
		t.Errorf("429 through the app's ErrorHandler: %+v; want its text/plain body", got)
	}
	if want.header.Get("Retry-After") == "" || want.header.Get("Ratelimit-Limit") == "" {
		t.Fatalf("net/http's 429 lacks the fields this test compares: %v", want.header)
	}
	for k := range want.header {
		switch k {
		case "Content-Type", "Content-Length", "Date": // the body's, the server's
		case "Retry-After", "Ratelimit-Reset": // seconds that may have passed between the runs
			if got.header.Get(k) == "" {
				t.Errorf("429 through the app's ErrorHandler lacks %s (net/http's %q)", k, want.header.Get(k))
			}
		default:
			if fmt.Sprint(got.header[k]) != fmt.Sprint(want.header[k]) {
				t.Errorf("429 through the app's ErrorHandler: %s %q, net/http's %q", k, got.header[k], want.header[k])
			}
		}
	}
	if full.status != 503 {
		t.Errorf("503 through the app's ErrorHandler: %+v", full)
	}
	for range 2 {
		var rl *resilience.RateLimitRejectedError
		var bulk *resilience.ConcurrencyLimitRejectedError
		if err := <-handled; !errors.As(err, &rl) && !errors.As(err, &bulk) {
			t.Errorf("the ErrorHandler got %v, want the typed rejection", err)
		}
	}
}

// TestCustomErrorHandlerTimeout: an app's own ErrorHandler receives the
// 504's *resiliencefiber.Rejection too. Without ServeOnTime the client
// gets what it answers, once the handler returns. With ServeOnTime the
// client's 504 leaves at the deadline, while the handler still runs, so
// it is the default one; the ErrorHandler still gets the rejection when
// the handler returns, and what it writes then goes nowhere.
func TestCustomErrorHandlerTimeout(t *testing.T) {
	for _, onTime := range []bool{false, true} {
		t.Run(fmt.Sprintf("ServeOnTime=%v", onTime), func(t *testing.T) {
			mw, err := resiliencefiber.New(inbound.Options{Timeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			handled := make(chan error, 1)
			app := fiber.New(fiber.Config{
				DisableStartupMessage: true,
				ErrorHandler: func(c *fiber.Ctx, err error) error {
					handled <- err
					return c.Status(fiber.StatusGatewayTimeout).SendString("the app's own 504")
				},
			})
			hold := make(chan struct{})
			app.Get("/slow", mw.Handler, func(c *fiber.Ctx) error {
				<-c.UserContext().Done()
				<-hold // runs on past its deadline
				return c.UserContext().Err()
			})
			if onTime {
				resiliencefiber.ServeOnTime(app)
			}
			url := serve(t, app)
			defer http.DefaultClient.CloseIdleConnections()
			answered := make(chan answer, 1)
			go func() { answered <- get(t, url+"/slow", nil) }()
			var a answer
			if onTime {
				select {
				case a = <-answered: // at the deadline, the handler held
				case <-time.After(10 * time.Second): // a bound for a broken build, not a timing check
					close(hold)
					t.Fatal("no answer while the handler ran past its deadline")
				}
				close(hold)
			} else {
				close(hold)
				a = <-answered
			}
			want := "the app's own 504"
			if onTime {
				want = `{"statusCode":504,"error":"Gateway Timeout","message":"The request took too long to process.","code":"TIMEOUT"}`
			}
			if a.status != 504 || a.body != want {
				t.Errorf("answer: %d %q, want 504 %q", a.status, a.body, want)
			}
			var te *resilience.TimeoutRejectedError
			var fe *fiber.Error
			if err := <-handled; !errors.As(err, &te) || !errors.As(err, &fe) || fe.Code != 504 {
				t.Errorf("the ErrorHandler got %v, want the 504 rejection", err)
			}
		})
	}
}

// TestMountedErrorHandler pins what app.Mount does: fiber hands an error to
// the ErrorHandler of the mounted app it happened in, but the middleware
// asks the app serving the request (c.App(), the root) whether the
// ErrorHandler is fiber's default, as it must before returning the error.
// So with the default one at the root, a rejection in a mounted app is
// written as the JSON default, and the mounted app's own ErrorHandler sees
// only the handlers' errors; giving the root an ErrorHandler of its own
// lets fiber route the rejection to the mounted one.
func TestMountedErrorHandler(t *testing.T) {
	for _, rootHandler := range []bool{false, true} {
		t.Run(fmt.Sprintf("root ErrorHandler=%v", rootHandler), func(t *testing.T) {
			mw, err := resiliencefiber.New(inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			sub := fiber.New(fiber.Config{ErrorHandler: func(c *fiber.Ctx, err error) error {
				return c.Status(fiber.StatusTeapot).SendString("sub: " + err.Error())
			}})
			sub.Get("/x", mw.Handler, func(c *fiber.Ctx) error { return c.SendString("ok") })
			sub.Get("/fails", func(c *fiber.Ctx) error { return errors.New("handler error") })
			cfg := fiber.Config{DisableStartupMessage: true}
			if rootHandler {
				cfg.ErrorHandler = func(c *fiber.Ctx, err error) error { return fiber.DefaultErrorHandler(c, err) }
			}
			app := fiber.New(cfg)
			app.Mount("/sub", sub)
			url := serve(t, app)
			defer http.DefaultClient.CloseIdleConnections()
			if a := get(t, url+"/sub/x", nil); a.status != 200 {
				t.Fatalf("first request: %+v", a)
			}
			a := get(t, url+"/sub/x", nil)
			if rootHandler && (a.status != fiber.StatusTeapot || a.body != "sub: Too Many Requests" || a.header.Get("Retry-After") == "") {
				t.Errorf("429 in the mounted app, root with an ErrorHandler: %+v; want the mounted app's answer with Retry-After", a)
			}
			if !rootHandler && (a.status != 429 || !strings.Contains(a.body, `"code":"RATE_LIMITED"`)) {
				t.Errorf("429 in the mounted app, root with fiber's default: %+v; want the JSON default", a)
			}
			if a := get(t, url+"/sub/fails", nil); a.status != fiber.StatusTeapot {
				t.Errorf("a handler's error in the mounted app: %+v; want its ErrorHandler's answer", a)
			}
		})
	}
}

// TestOnTime504KeepsItsRateFields: the RateLimit fields the 504 at the
// deadline repeats are copies taken when the request was admitted, not
// views of the response's header buffers, which the handler may reuse
// while it runs on (here: it resets its response and sets fields of its
// own). The 504 carries the admitted request's values, and none of the
// handler's.
func TestOnTime504KeepsItsRateFields(t *testing.T) {
	mw, err := resiliencefiber.New(inbound.Options{
		Timeout:   50 * time.Millisecond,
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 10, Window: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	defer close(hold)
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/slow", mw.Handler, func(c *fiber.Ctx) error {
		c.Response().Header.Reset()
		for _, f := range []string{"X-One", "X-Two", "X-Three", "X-Four", "X-Five"} {
			c.Set(f, "z") // short: it fits in the buffers the RateLimit values had
		}
		<-hold // ignores its deadline
		return nil
	})
	resiliencefiber.ServeOnTime(app)
	url := serve(t, app)
	defer http.DefaultClient.CloseIdleConnections()
	a := get(t, url+"/slow", nil)
	if a.status != 504 || a.header.Get("Ratelimit-Limit") != "10" || a.header.Get("Ratelimit-Remaining") != "9" ||
		a.header.Get("Ratelimit-Reset") != "3600" || a.header.Get("X-One") != "" {
		t.Errorf("504 at the deadline: %d %v; want RateLimit-Limit 10, Remaining 9, Reset 3600 and none of the handler's fields", a.status, a.header)
	}
}

// TestOnTimeStreamedBody: with fiber's StreamRequestBody, a request's body
// is read from the connection while the handler runs, so ServeOnTime
// leaves such requests to the middleware alone (see
// TestOnTimeHandlerLeavesStreamedBodies): a handler that reads its body
// after the deadline still reads all of it, and its client gets the 504
// when it returns.
func TestOnTimeStreamedBody(t *testing.T) {
	mw, err := resiliencefiber.New(inbound.Options{Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("0123456789abcdef", 64<<10/16) // beyond fasthttp's 4 KiB read buffer
	read := make(chan string, 1)
	app := fiber.New(fiber.Config{DisableStartupMessage: true, StreamRequestBody: true})
	app.Post("/upload", mw.Handler, func(c *fiber.Ctx) error {
		<-c.UserContext().Done() // past the deadline before it reads
		b, err := io.ReadAll(c.Context().RequestBodyStream())
		if err != nil {
			read <- "error: " + err.Error()
		} else {
			read <- string(b)
		}
		return nil
	})
	resiliencefiber.ServeOnTime(app)
	url := serve(t, app)
	defer http.DefaultClient.CloseIdleConnections()
	resp, err := http.Post(url+"/upload", "application/octet-stream", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got := readBody(t, resp)
	if b := <-read; b != body {
		t.Errorf("the handler read %d bytes of its body after the deadline (%.40q…), want all %d", len(b), b, len(body))
	}
	if resp.StatusCode != 504 || !strings.Contains(got, `"code":"TIMEOUT"`) {
		t.Errorf("answer: %d %q, want the 504", resp.StatusCode, got)
	}
}

// TestOnTimeHandlerLeavesStreamedBodies: OnTimeHandler answers on time
// only requests whose body fasthttp has read; one whose body is still
// streamed from the connection (StreamRequestBody) runs as without it,
// because after an on-time answer fasthttp hands the connection's reader
// to other connections while the late handler could still read from it.
func TestOnTimeHandlerLeavesStreamedBodies(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		var slot bool
		h := resiliencefiber.OnTimeHandler(func(rc *fasthttp.RequestCtx) { slot = resiliencefiber.OnTimeSlot(rc) })
		rc := new(fasthttp.RequestCtx)
		rc.Request.Header.SetMethod(http.MethodPost)
		if streamed {
			rc.Request.SetBodyStream(strings.NewReader("body"), 4)
		} else {
			rc.Request.SetBodyString("body")
		}
		h(rc)
		if slot == streamed {
			t.Errorf("streamed body %v: answered on time %v, want %v", streamed, slot, !streamed)
		}
	}
}

// netHTTPRejections returns the full-queue and rate-limited answers of the
// net/http middleware with rejectionOptions: the reference the fiber
// adapter's rejections are compared with. entered and hold gate its /hold
// route, as they then gate the fiber app's.
func netHTTPRejections(t *testing.T, entered, hold chan struct{}) (full, limited answer) {
	t.Helper()
	in, err := inbound.New(rejectionOptions())
	if err != nil {
		t.Fatal(err)
	}
	ref := httptest.NewServer(in.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-hold
		}
		_, _ = io.WriteString(w, "ok")
	})))
	defer ref.Close()
	defer http.DefaultClient.CloseIdleConnections()
	return rejections(t, ref.URL, entered, hold)
}
