package resiliencechi_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"

	resiliencechi "github.com/ylcnfrht/resilience/adapters/chi"
)

// What the client of a panicking handler receives: with neither the option
// nor a recoverer net/http drops the connection; with AnswerPanics a 500
// INTERNAL in the rejections' JSON; behind chi's Recoverer (outermost) its
// empty 500. In every case the permit is back and the next request runs.
func TestPanicAnswers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		answer    bool
		recoverer bool
		want      string // the client's result: "dropped" or "STATUS BODY…"
	}{
		{"neither", false, false, "dropped"},
		{"AnswerPanics", true, false, `500 {"statusCode":500,"error":"Internal Server Error","message":"The request could not be processed.","code":"INTERNAL"}`},
		{"Recoverer", false, true, "500 "},
		{"both", true, true, `500 {"statusCode":500,"error":"Internal Server Error","message":"The request could not be processed.","code":"INTERNAL"}`},
	} {
		for _, timeout := range []time.Duration{0, time.Minute} {
			mw, err := resiliencechi.New(inbound.Options{
				Timeout:      timeout,
				Concurrency:  &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Second},
				AnswerPanics: tc.answer,
			})
			if err != nil {
				t.Fatal(err)
			}
			r := chi.NewRouter()
			if tc.recoverer {
				r.Use(middleware.Recoverer)
			}
			r.Use(mw.Handler)
			r.Get("/panic", func(http.ResponseWriter, *http.Request) { panic("a handler's bug") })
			r.Get("/ok", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
			got := clientResult(t, r, "/panic")
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("%s, timeout %v: the client got %q, want %q…", tc.name, timeout, got, tc.want)
			}
			if st := mw.Stats(); st.InFlight != 0 {
				t.Errorf("%s, timeout %v: %d in flight after the panic", tc.name, timeout, st.InFlight)
			}
			if got := clientResult(t, r, "/ok"); got != "200 ok" {
				t.Errorf("%s, timeout %v: the next request got %q", tc.name, timeout, got)
			}
		}
	}
}

// clientResult serves one GET on a real server (stderr and the server's
// log silenced) and says what the client got.
func clientResult(t *testing.T, h http.Handler, path string) string {
	t.Helper()
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
