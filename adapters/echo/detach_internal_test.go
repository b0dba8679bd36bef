package resilienceecho

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// The echo in use has the private context and Response fields the HTTP/2
// copy sets, and no other context field than those the copy's notes
// share; if an echo release renames or adds one, this fails before timed
// HTTP/2 requests quietly fall back to a 504 whose stream is reset.
func TestEchoContextFieldsFound(t *testing.T) {
	if !detachable {
		t.Fatal("echo's context or Response lacks store, lock, pvalues, response, beforeFuncs or afterFuncs as this adapter knows them, or has a field it does not")
	}
	if got := reflect.TypeOf(echo.New().NewContext(nil, nil)); got != contextType {
		t.Fatalf("echo's context is %v, want %v", got, contextType)
	}
}

// adapt.Detached finds the detached writer under echo's Response writer
// when echo is served through adapt.DetachHTTP2, and only then: the
// middleware then leaves the request on DetachHTTP2's worker.
func TestDetachedSeenThroughEchosWriter(t *testing.T) {
	var got []bool
	e := echo.New()
	e.GET("/", func(c echo.Context) error { got = append(got, adapt.Detached(c.Response().Writer)); return nil })
	for _, h := range []http.Handler{adapt.DetachHTTP2(e), e} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/2.0", 2, 0
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if len(got) != 2 || !got[0] || got[1] {
		t.Fatalf("adapt.Detached under DetachHTTP2, then served directly: %v, want [true false]", got)
	}
}
