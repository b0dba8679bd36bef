package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Invariant: over h2c, as run serves it, a request whose handler ignores
// its context gets a 504 whose stream ends cleanly, on every framework the
// server runs on net/http: the client reads the whole body without a
// stream error (gin and echo need their router run detached for this).
func TestWorkIgnoringContextGets504OverH2C(t *testing.T) {
	for _, fw := range []string{"chi", "gin", "echo"} {
		t.Run(fw, func(t *testing.T) {
			cfg, err := parseConfig([]string{"-framework", fw, "-timeout", "50ms"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			h, mw, err := newServer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(h)
			srv.Config.Protocols = serverProtocols()
			srv.Start()
			t.Cleanup(srv.Close)
			tr := &http.Transport{Protocols: new(http.Protocols)}
			tr.Protocols.SetUnencryptedHTTP2(true)
			t.Cleanup(tr.CloseIdleConnections)
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/work?ms=400")
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusGatewayTimeout || err != nil {
				t.Fatalf("HTTP/%d %d, body %q, read error %v; want an HTTP/2 504 read to its end", resp.ProtoMajor, resp.StatusCode, body, err)
			}
			waitFor(t, "the late handler to return", func() bool { return mw.Stats().Late == 0 && mw.Stats().InFlight == 0 })
		})
	}
}
