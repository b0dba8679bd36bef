package resilienceecho_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	resilienceecho "github.com/ylcnfrht/resilience/adapters/echo"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

const internalJSON = `{"statusCode":500,"error":"Internal Server Error","message":"The request could not be processed.","code":"INTERNAL"}`

// What the client of a panicking handler receives: with neither the option
// nor a recoverer net/http drops the connection; with AnswerPanics a 500
// INTERNAL in the rejections' JSON; behind echo's Recover (outermost, with
// DisableStackAll as docs/guide.md says) echo's own 500. In every case the
// permit is back and the next request runs.
func TestPanicAnswers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		answer    bool
		recoverer bool
		want      string
	}{
		{"neither", false, false, "dropped"},
		{"AnswerPanics", true, false, "500 " + internalJSON},
		{"Recover", false, true, "500 {\"message\":\"Internal Server Error\"}\n"},
		{"both", true, true, "500 " + internalJSON},
	} {
		for _, timeout := range []time.Duration{0, time.Minute} {
			mw, err := resilienceecho.New(inbound.Options{
				Timeout:      timeout,
				Concurrency:  &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Second},
				AnswerPanics: tc.answer,
			})
			if err != nil {
				t.Fatal(err)
			}
			e := echo.New()
			e.Logger.SetOutput(io.Discard)
			if tc.recoverer {
				e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true, DisablePrintStack: true}))
			}
			e.Use(mw.Handler)
			e.GET("/panic", func(echo.Context) error { panic("a handler's bug") })
			e.GET("/ok", func(c echo.Context) error { return c.String(200, "ok") })
			if got := clientResult(e, "/panic"); got != tc.want {
				t.Errorf("%s, timeout %v: the client got %q, want %q", tc.name, timeout, got, tc.want)
			}
			if st := mw.Stats(); st.InFlight != 0 {
				t.Errorf("%s, timeout %v: %d in flight after the panic", tc.name, timeout, st.InFlight)
			}
			if got := clientResult(e, "/ok"); got != "200 ok" {
				t.Errorf("%s, timeout %v: the next request got %q", tc.name, timeout, got)
			}
		}
	}
}

// clientResult serves one GET on a real server (its log silenced) and
// says what the client got: "dropped", or the status and the body.
func clientResult(h http.Handler, path string) string {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		return "dropped"
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.Status[:3] + " " + string(body)
}
