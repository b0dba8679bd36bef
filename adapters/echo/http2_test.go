package resilienceecho_test

import (
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ylcnfrht/resilience/adapters/echo"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestHTTP2TimeoutWholeThenReset: over HTTP/2 (h2c) the 504 reaches the
// client whole at the deadline while the handler, ignoring its context,
// still runs; at most the stream's end is then a reset, as the package
// documentation says, and the connection serves other requests meanwhile.
func TestHTTP2TimeoutWholeThenReset(t *testing.T) {
	mw, err := resilienceecho.New(inbound.Options{
		Timeout:     50 * time.Millisecond,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	release, returned := make(chan struct{}), make(chan struct{})
	e, _ := newEcho()
	e.Use(mw.Handler)
	e.GET("/slow", func(c echo.Context) error { defer close(returned); <-release; return nil })
	e.GET("/ok", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	srv := httptest.NewUnstartedServer(e)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second} // a 504 held back until the handler returns fails
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
