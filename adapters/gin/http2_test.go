package resiliencegin_test

import (
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ylcnfrht/resilience/adapters/gin"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestHTTP2TimeoutEndsStream: over HTTP/2 (h2c), with the engine served
// directly (r.Use(mw.Handler) and nothing else), the 504 reaches the
// client at the deadline while the handler, ignoring its context, still
// runs, and its stream ends cleanly (END_STREAM, no reset: the body reads
// to its end without error); nothing is logged, and the connection serves
// other requests meanwhile.
func TestHTTP2TimeoutEndsStream(t *testing.T) {
	mw, e, open, returned := newSlowGin(t)
	defer open()
	e.GET("/ok", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	srv, client, logged := startH2C(t, e)

	resp, body, err := get(t, client, srv.URL+"/slow")
	want, _ := (&adapt.Kit{Middleware: mw.Inbound()}).Render(&resilience.TimeoutRejectedError{})
	if err != nil || resp.ProtoMajor != 2 || resp.StatusCode != http.StatusGatewayTimeout || string(body) != string(want.Body) {
		t.Fatalf("got %s %d %q %v, want an HTTP/2 504 %q whose stream ends cleanly", resp.Proto, resp.StatusCode, body, err, want.Body)
	}
	stillRunning(t, returned)
	resp, body, err = get(t, client, srv.URL+"/ok")
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("while the late handler runs: %d %q %v, want 200 ok", resp.StatusCode, body, err)
	}
	stillRunning(t, returned)
	endQuietly(t, mw, open, returned, logged)
}

// Router, deprecated, returns the router unchanged: served through it the
// HTTP/2 504 ends its stream cleanly as well, and nothing is logged. An
// engine served through adapt.DetachHTTP2 itself (what Router returned
// before) is not detached a second time, and behaves the same.
func TestHTTP2TimeoutEndsStreamUnderRouter(t *testing.T) {
	for name, wrap := range map[string]func(*resiliencegin.Middleware, http.Handler) http.Handler{
		"Router":            func(mw *resiliencegin.Middleware, h http.Handler) http.Handler { return mw.Router(h) },
		"adapt.DetachHTTP2": func(_ *resiliencegin.Middleware, h http.Handler) http.Handler { return adapt.DetachHTTP2(h) },
	} {
		t.Run(name, func(t *testing.T) {
			mw, e, open, returned := newSlowGin(t)
			defer open()
			if name == "Router" && mw.Router(e) != http.Handler(e) {
				t.Fatal("Router did not return the router unchanged")
			}
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

// startH2C serves h over h2c on loopback, its ErrorLog kept, and returns
// a client whose timeout fails a 504 held back until the handler returns.
func startH2C(t *testing.T, h http.Handler) (*httptest.Server, *http.Client, *syncBuffer) {
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

// newSlowGin makes a middleware of 50 ms Timeout (two permits) and a gin
// engine using it whose GET /slow ignores its context: it runs until open
// is called, then returned is closed. open may be called more than once;
// defer it, so that a failing test lets the handler end.
func newSlowGin(t *testing.T) (mw *resiliencegin.Middleware, e *gin.Engine, open func(), returned <-chan struct{}) {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	mw, err := resiliencegin.New(inbound.Options{
		Timeout:     50 * time.Millisecond,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	release, ret := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e = gin.New()
	e.Use(mw.Handler)
	e.GET("/slow", func(c *gin.Context) { defer close(ret); <-release })
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

// TestOverHTTP2 runs the tests of gin's flow around the 504 (late
// writes, no second response, outer middlewares, races on the context,
// rejections aborting the chain) over HTTP/2, where the middleware runs
// the chain on a worker for a copy of the context.
func TestOverHTTP2(t *testing.T) {
	overHTTP2 = true
	defer func() { overHTTP2 = false }()
	for name, test := range map[string]func(*testing.T){
		"DeadlineReachesHandler":         TestDeadlineReachesHandler,
		"ContextAndRoute":                TestContextAndRoute,
		"NoRaceOnGinContext":             TestNoRaceOnGinContext,
		"UpstreamDeadlineWithoutTimeout": TestUpstreamDeadlineWithoutTimeout,
		"LateWritesStayInTheirRequest":   TestLateWritesStayInTheirRequest,
		"NoDoubleResponse":               TestNoDoubleResponse,
		"RejectionAbortsChain":           TestRejectionAbortsChain,
		"OuterMiddlewareAfterThe504":     TestOuterMiddlewareAfterThe504,
		"RejectionMatchesNetHTTP":        TestRejectionMatchesNetHTTP,
	} {
		t.Run(name, test)
	}
}

// endQuietly lets the late handler return, waits for it and for the
// middleware to be idle, and fails t if the server logged anything.
func endQuietly(t *testing.T, mw *resiliencegin.Middleware, open func(), returned <-chan struct{}, logged *syncBuffer) {
	t.Helper()
	open()
	<-returned
	waitIdle(t, mw)
	if got := logged.String(); got != "" {
		t.Errorf("server log %q, want nothing", got)
	}
}
