package resiliencegin_test

import (
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ylcnfrht/resilience/adapters/gin"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestHTTP2TimeoutWholeThenReset: over HTTP/2 (h2c) the 504 reaches the
// client whole at the deadline while the handler, ignoring its context,
// still runs; at most the stream's end is then a reset, as the package
// documentation says, and the connection serves other requests meanwhile.
func TestHTTP2TimeoutWholeThenReset(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	mw, err := resiliencegin.New(inbound.Options{
		Timeout:     50 * time.Millisecond,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	release, returned := make(chan struct{}), make(chan struct{})
	e := gin.New()
	e.Use(mw.Handler)
	e.GET("/slow", func(c *gin.Context) { defer close(returned); <-release })
	e.GET("/ok", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	srv, client, logged := startH2C(t, e)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	resp, err := client.Get(srv.URL + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body) // a reset after the body is allowed
	resp.Body.Close()
	want, _ := (&adapt.Kit{Middleware: mw.Inbound()}).Render(&resilience.TimeoutRejectedError{})
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusGatewayTimeout || string(body) != string(want.Body) {
		t.Fatalf("got %s %d %q, want HTTP/2 504 %q", resp.Proto, resp.StatusCode, body, want.Body)
	}
	select {
	case <-returned:
		t.Fatal("the 504 came only when the handler returned")
	default:
	}
	// Not silent: the missing Router is logged, naming the fix.
	if got := logged.String(); strings.Count(got, "Router(router)") != 1 {
		t.Errorf("server log %q, want one line naming Router", got)
	}
	resp, err = client.Get(srv.URL + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("while the late handler runs: %d %q %v, want 200 ok", resp.StatusCode, body, err)
	}
	close(release)
	<-returned
	waitIdle(t, mw)
}

// With the router served through Router, as the quick start does, the
// HTTP/2 504 ends its stream cleanly (END_STREAM, no reset: the body reads
// to its end without error) while the late handler runs on, and nothing
// is logged.
func TestHTTP2TimeoutEndsStreamUnderRouter(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	mw, err := resiliencegin.New(inbound.Options{
		Timeout:     50 * time.Millisecond,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	release, returned := make(chan struct{}), make(chan struct{})
	e := gin.New()
	e.Use(mw.Handler)
	e.GET("/slow", func(c *gin.Context) { defer close(returned); <-release })
	srv, client, logged := startH2C(t, mw.Router(e))
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()
	resp, err := client.Get(srv.URL + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.ProtoMajor != 2 || resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("got %s %d %q %v, want an HTTP/2 504 whose stream ends cleanly", resp.Proto, resp.StatusCode, body, err)
	}
	select {
	case <-returned:
		t.Fatal("the 504 came only when the handler returned")
	default:
	}
	open()
	<-returned
	waitIdle(t, mw)
	if got := logged.String(); got != "" {
		t.Errorf("server log %q, want nothing", got)
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
