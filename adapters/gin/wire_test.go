package resiliencegin_test

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ylcnfrht/resilience/adapters/gin"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestRejectionMatchesNetHTTP: for GET and HEAD, with the default bodies
// and with Options.Render's (spaced JSON with HTML in it, plain text),
// behind gin's Recovery in debug mode, a rejection carries the status,
// fields, length and body the net/http middleware sends.
func TestRejectionMatchesNetHTTP(t *testing.T) {
	gin.SetMode(gin.DebugMode)
	oldOut := gin.DefaultWriter
	gin.DefaultWriter = io.Discard
	defer func() { gin.SetMode(gin.ReleaseMode); gin.DefaultWriter = oldOut }()
	renders := []struct {
		name   string
		render func(error, inbound.Response) inbound.Response
	}{
		{"default", nil},
		{"Render JSON with spaces and HTML", func(_ error, def inbound.Response) inbound.Response {
			def.Body = []byte("{\n  \"detail\": \"a <b> & c\"\n}")
			return def
		}},
		{"Render text", func(_ error, def inbound.Response) inbound.Response {
			def.Header = def.Header.Clone()
			def.Header.Set("Content-Type", "text/plain; charset=utf-8")
			def.Body = []byte("busy, <retry> later")
			return def
		}},
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	do := func(t *testing.T, ts *testServer, method string) answer {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+"/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"Retry-After", "Ratelimit-Reset"} {
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get(f) == "" {
				t.Errorf("%s: a 429 without %s", method, f)
			}
		}
		return answerOf(t, resp, "Date", "Retry-After", "Ratelimit-Reset") // the last two count down
	}
	for _, rc := range renders {
		t.Run(rc.name, func(t *testing.T) {
			opts := inbound.Options{
				RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Hour,
					Key: func(context.Context) string { return "one" }},
				Render: rc.render,
			}
			ref, err := inbound.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			mw, err := resiliencegin.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			e := gin.New()
			e.Use(gin.Recovery())
			e.Use(mw.Handler)
			e.Any("/x", gin.WrapH(ok))
			want, got := serveGin(t, ref.Handler(ok)), serveGin(t, e)
			for _, s := range []*testServer{want, got} { // the one permit of the window
				if a := do(t, s, http.MethodGet); a.status != http.StatusOK {
					t.Fatalf("first request: %d, want 200", a.status)
				}
			}
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				w, g := do(t, want, method), do(t, got, method)
				if w.status != http.StatusTooManyRequests {
					t.Fatalf("net/http: %s got %d, want 429", method, w.status)
				}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("%s: got %+v, want, as net/http sends it, %+v", method, g, w)
				}
			}
		})
	}
}

// answer is a response as the wire tests compare it.
type answer struct {
	status int
	header http.Header
	length int64
	body   string
}

// answerOf reads resp whole and closes it, its header without the fields
// named in drop (a date, a countdown or a hop-by-hop field).
func answerOf(t *testing.T, resp *http.Response, drop ...string) answer {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	h := resp.Header.Clone()
	for _, f := range drop {
		h.Del(f)
	}
	return answer{resp.StatusCode, h, resp.ContentLength, string(b)}
}
