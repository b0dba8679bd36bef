package outbound

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"pgregory.net/rapid"
)

// An invalid option set is refused naming the field, and the transport
// goes on with its old configuration.
func TestTransportReconfigureRefusesInvalid(t *testing.T) {
	var calls atomic.Int32
	base := baseFunc(func(*http.Request) (*http.Response, error) { calls.Add(1); return response(503, ""), nil })
	p := pipeline(t, resilience.NewBuilder[*http.Response]().AddRetry(fastRetry(2)))
	tr, err := New(Options{Base: base, Pipeline: p})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		field string
		opts  Options
	}{
		{"Options.AttemptTimeout", Options{Base: base, AttemptTimeout: -time.Second}},
		{"Options.Pipeline", Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddTimeout(resilience.TimeoutOptions{Timeout: time.Second}))}},
	} {
		var ce *resilience.ConfigError
		if err := tr.Reconfigure(tc.opts); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Fatalf("%s: %v", tc.field, err)
		}
	}
	req, _ := http.NewRequest("GET", "http://x/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if calls.Load() != 3 {
		t.Fatalf("%d attempts, want the old pipeline's 3", calls.Load())
	}
}

// Under concurrent requests and reconfigurations (retrying POSTs or not,
// a pipeline of 1 to 3 retries), every request runs wholly under one
// configuration: a POST is sent once, or as many times as a
// configuration that retries POSTs allows, never a mix; and every
// response body the base returned is closed, the retried-away ones by
// the transport.
func TestTransportReconfigureUnderTrafficRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		synctest.Test(t, func(t *testing.T) { transportTraffic(rt) })
	})
}

func transportTraffic(rt *rapid.T) {
	var (
		mu             sync.Mutex
		attempts       = map[string]int{}
		opened, closed atomic.Int32
	)
	base := baseFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		attempts[r.Header.Get("X-Id")]++
		mu.Unlock()
		opened.Add(1)
		resp := response(503, "busy")
		resp.Body = &closeCounter{ReadCloser: resp.Body, n: &closed}
		return resp, nil
	})
	pipes := make([]*resilience.Pipeline[*http.Response], 4)
	for i := 1; i <= 3; i++ {
		p, err := resilience.NewBuilder[*http.Response]().AddRetry(fastRetry(i)).Build()
		if err != nil {
			rt.Fatal(err)
		}
		pipes[i] = p
	}
	valid := map[int]bool{1: true} // how often a configuration in force sends a POST
	tr, err := New(Options{Base: base, Pipeline: pipes[1]})
	if err != nil {
		rt.Fatal(err)
	}
	n := rapid.IntRange(1, 20).Draw(rt, "requests")
	var wg sync.WaitGroup
	for i := range n {
		req, _ := http.NewRequest("POST", "http://x/", strings.NewReader("body"))
		req.Header.Set("X-Id", strconv.Itoa(i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := tr.RoundTrip(req)
			if err != nil {
				panic(err) // a 503 is a response, never an error here
			}
			resp.Body.Close()
		}()
		if rapid.Bool().Draw(rt, "reconfigure") {
			retries := rapid.IntRange(1, 3).Draw(rt, "retries")
			anyMethod := rapid.Bool().Draw(rt, "retry POST")
			if anyMethod {
				valid[retries+1] = true
			}
			if err := tr.Reconfigure(Options{Base: base, Pipeline: pipes[retries], RetryNonIdempotent: anyMethod}); err != nil {
				rt.Fatal(err)
			}
		}
		time.Sleep(time.Duration(rapid.IntRange(0, 3).Draw(rt, "gap")) * time.Millisecond)
	}
	wg.Wait()
	for id, a := range attempts {
		if !valid[a] {
			rt.Fatalf("request %s was sent %d times; the configurations allowed %v", id, a, valid)
		}
	}
	if len(attempts) != n || opened.Load() != closed.Load() {
		rt.Fatalf("%d of %d requests sent; %d bodies opened, %d closed", len(attempts), n, opened.Load(), closed.Load())
	}
}
