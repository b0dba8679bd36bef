package main

import (
	"io"
	"net/http"
	"testing"
)

// Invariant: over h2c, as run serves it, a request whose handler ignores
// its context gets a 504 whose stream ends cleanly, on every framework the
// server runs on net/http: the client reads the whole body without a
// stream error (gin and echo detach a timed HTTP/2 request themselves).
func TestWorkIgnoringContextGets504OverH2C(t *testing.T) {
	for _, fw := range []string{"chi", "gin", "echo"} {
		t.Run(fw, func(t *testing.T) {
			s, h2 := startH2C(t, fw, "-timeout", "50ms")
			resp, err := h2.Get(s.url + "/work?ms=400")
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusGatewayTimeout || err != nil {
				t.Fatalf("HTTP/%d %d, body %q, read error %v; want an HTTP/2 504 read to its end", resp.ProtoMajor, resp.StatusCode, body, err)
			}
			waitFor(t, "the late handler to return", func() bool { return s.mw.Stats().Late == 0 && s.mw.Stats().InFlight == 0 })
		})
	}
}
