package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// X-Priority maps to classes 0..9; anything else is the default class.
func TestRequestPriority(t *testing.T) {
	for _, c := range []struct {
		header string
		want   int
	}{{"0", 0}, {"9", 9}, {"3", 3}, {"", defaultPriority}, {"10", defaultPriority}, {"-1", defaultPriority}, {"high", defaultPriority}} {
		r := httptest.NewRequest("GET", "/work", nil)
		if c.header != "" {
			r.Header.Set("X-Priority", c.header)
		}
		ctx := adapt.NewContext(context.Background(), &inbound.Request{Header: r.Header})
		if got := requestPriority(ctx); got != c.want {
			t.Errorf("X-Priority %q: priority %d, want %d", c.header, got, c.want)
		}
	}
}

// /debug/limits serves exactly the provider's values.
func TestLimitsHandler(t *testing.T) {
	l, err := resilience.NewAdaptiveLimiter(resilience.AdaptiveLimiterOptions{InitialLimit: 7})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := l.TryAcquire()
	defer p.Release(resilience.LimitIgnored)
	w := httptest.NewRecorder()
	limitsHandler(l.Stats).ServeHTTP(w, httptest.NewRequest("GET", "/debug/limits", nil))
	var got resilience.LimiterStats
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("body %q, content type %q: %v", w.Body, w.Header().Get("Content-Type"), err)
	}
	if got != (resilience.LimiterStats{Limit: 7, InFlight: 1}) {
		t.Fatalf("served %+v, want limit 7, in flight 1", got)
	}
}

// The simulated service answers in base up to the knee and
// proportionally slower beyond (synctest: fake clock, so the durations are
// exact).
func TestWorkHandlerLatencyKnee(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := workHandler(2, 10*time.Millisecond)
		took := make([]time.Duration, 4)
		var wg sync.WaitGroup
		for i := range took {
			wg.Go(func() {
				start := time.Now()
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", "/work", nil))
				if w.Code != 200 || w.Body.String() != "done\n" {
					t.Errorf("%d %q", w.Code, w.Body)
				}
				took[i] = time.Since(start)
			})
			synctest.Wait() // start them one by one: the i-th sees i+1 active
		}
		wg.Wait()
		want := []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 15 * time.Millisecond, 20 * time.Millisecond}
		if !slices.Equal(took, want) {
			t.Fatalf("latencies %v, want %v", took, want)
		}
	})
}

// A handler whose context has ended writes nothing. The latency is far
// longer than the test: with a short one the timer and the cancelled
// context could both be ready, and select would pick either, so the test
// would sometimes see "done".
func TestWorkHandlerStopsWhenContextEnds(t *testing.T) {
	h := workHandler(1, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/work", nil).WithContext(ctx))
	if w.Body.Len() != 0 {
		t.Fatalf("wrote %q after its context ended", w.Body)
	}
}

// The chi service under bounded overload over loopback: it sheds with 503
// BULKHEAD_FULL, the important class (X-Priority 1) is admitted at least as
// often as the background class (X-Priority 8), and it serves normally
// once the overload ends.
//
// Why it is not flaky: 120 closed-loop clients against a service whose
// limit stays well below 70 (knee 4, so latency grows with every request
// past four, and the gradient brings the limit down) plus a queue of 50
// must shed whatever the machine's speed; and priority 1 both outranks
// priority 8 for every freed permit and evicts it from a full queue, so
// background requests get through only when no important one waits.
func TestServiceShedsByPriorityUnderOverload(t *testing.T) {
	const (
		perClass = 60
		base     = 50 * time.Millisecond // capacity: knee / base = 80 req/s
		knee     = 4
		offered  = 2 * time.Second
		backoff  = 50 * time.Millisecond // a shed client waits before retrying
	)
	h, err := newService(knee, base)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * perClass}}
	defer client.CloseIdleConnections()

	get := func(path, priority string) (int, string, error) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if priority != "" {
			req.Header.Set("X-Priority", priority)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}

	var (
		mu       sync.Mutex
		admitted = map[string]int{}
		shed     int
		failures []string
	)
	stop := time.Now().Add(offered)
	var wg sync.WaitGroup
	for _, priority := range []string{"1", "8"} {
		for range perClass {
			wg.Go(func() {
				for time.Now().Before(stop) {
					code, body, err := get("/work", priority)
					mu.Lock()
					switch {
					case err != nil:
						failures = append(failures, err.Error())
					case code == http.StatusOK:
						admitted[priority]++
					case code == http.StatusServiceUnavailable && strings.Contains(body, `"code":"BULKHEAD_FULL"`):
						shed++
					default:
						failures = append(failures, fmt.Sprintf("%d %q", code, body))
					}
					mu.Unlock()
					if code != http.StatusOK {
						time.Sleep(backoff)
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("admitted: priority 1 %d, priority 8 %d; shed %d", admitted["1"], admitted["8"], shed)
	if len(failures) > 0 {
		t.Fatalf("%d unexpected responses, first %s", len(failures), failures[0])
	}
	if shed == 0 {
		t.Error("no 503 BULKHEAD_FULL under overload")
	}
	if admitted["1"] == 0 || admitted["1"] < admitted["8"] {
		t.Errorf("priority 1 admitted %d times, priority 8 %d: want the important class admitted at least as often",
			admitted["1"], admitted["8"])
	}

	// Recovery: every permit and queue place came back, and a request of
	// the least important class is served again.
	code, body, err := get("/debug/limits", "")
	var limits map[string]int
	if err != nil || code != 200 || json.Unmarshal([]byte(body), &limits) != nil {
		t.Fatalf("/debug/limits: %d %q %v", code, body, err)
	}
	if limits["inflight"] != 0 || limits["queued"] != 0 || limits["limit"] < 4 {
		t.Fatalf("after the overload: %v, want nothing in flight or queued and the limit at least MinLimit 4", limits)
	}
	if code, body, err := get("/work", "9"); err != nil || code != 200 || body != "done\n" {
		t.Fatalf("after the overload: %d %q %v, want 200", code, body, err)
	}
}
