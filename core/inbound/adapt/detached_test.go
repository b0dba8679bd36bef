package adapt_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// unwrapping is a framework's writer over the one it was given.
type unwrapping struct{ http.ResponseWriter }

func (u unwrapping) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// Detached is true exactly for an HTTP/2 request DetachHTTP2 runs on a
// worker, seen through a writer that unwraps; an HTTP/1 request passes
// through DetachHTTP2 and is not detached.
func TestDetached(t *testing.T) {
	var got bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = adapt.Detached(unwrapping{w}) })
	for _, c := range []struct {
		name   string
		h      http.Handler
		proto2 bool
		want   bool
	}{
		{"HTTP/2 under DetachHTTP2", adapt.DetachHTTP2(h), true, true},
		{"HTTP/1 under DetachHTTP2", adapt.DetachHTTP2(h), false, false},
		{"HTTP/2 served directly", h, true, false},
	} {
		got = !c.want
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if c.proto2 {
			r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
		}
		c.h.ServeHTTP(httptest.NewRecorder(), r)
		if got != c.want {
			t.Errorf("%s: Detached = %v, want %v", c.name, got, c.want)
		}
	}
}
