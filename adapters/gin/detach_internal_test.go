package resiliencegin

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// The gin in use has the private Context fields the HTTP/2 copy sets; if
// a gin release renames them, this fails before timed HTTP/2 requests
// quietly fall back to a 504 whose stream is reset.
func TestGinContextFieldsFound(t *testing.T) {
	if !detachable {
		t.Fatal("gin.Context lacks writermem, params or skippedNodes as this adapter knows them")
	}
}

// adapt.Detached finds the detached writer under gin's writer when the
// engine is served through adapt.DetachHTTP2, and only then: the
// middleware then leaves the request on DetachHTTP2's worker.
func TestDetachedSeenThroughGinsWriter(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	var got []bool
	e := gin.New()
	e.GET("/", func(c *gin.Context) { got = append(got, adapt.Detached(c.Writer)) })
	for _, h := range []http.Handler{adapt.DetachHTTP2(e), e} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/2.0", 2, 0
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if len(got) != 2 || !got[0] || got[1] {
		t.Fatalf("adapt.Detached under DetachHTTP2, then served directly: %v, want [true false]", got)
	}
}

// Router wraps the router in adapt.DetachHTTP2 only when the middleware
// cannot detach by itself (a gin whose Context it cannot copy): then the
// logged advice to use Router still ends the stream cleanly.
func TestRouterWrapsOnlyWhenCopyingFails(t *testing.T) {
	mw, err := New(inbound.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e := gin.New()
	if mw.Router(e) != http.Handler(e) {
		t.Fatal("Router wrapped the router although the middleware detaches by itself")
	}
	defer func(was bool) { detachable = was }(detachable)
	detachable = false
	if mw.Router(e) == http.Handler(e) {
		t.Fatal("Router returned the router unchanged although the middleware cannot detach")
	}
}
