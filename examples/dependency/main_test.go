package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Both servers and every nested call start goroutines; none may survive.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitBound bounds every wait; it only matters when something is wrong.
const waitBound = 10 * time.Second

// setup starts the fake service and the front server on loopback.
func setup(t *testing.T, svc *recommendationService, cfg config) (frontURL string, client *http.Client) {
	t.Helper()
	svcSrv := httptest.NewServer(svc.handler())
	base := &http.Transport{MaxIdleConnsPerHost: 64}
	cfg.serviceURL = svcSrv.URL
	cfg.base = base
	h, err := newFront(cfg)
	if err != nil {
		t.Fatal(err)
	}
	frontSrv := httptest.NewServer(h)
	ct := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(func() {
		ct.CloseIdleConnections()
		frontSrv.Close()
		base.CloseIdleConnections()
		svcSrv.Close()
	})
	return frontSrv.URL, &http.Client{Transport: ct}
}

func getPage(t *testing.T, c *http.Client, url string) (page, int) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Error(err)
		return page{}, 0
	}
	defer resp.Body.Close()
	var p page
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Error(err)
		}
	}
	return p, resp.StatusCode
}

// A fast dependency: the page carries its recommendations.
func TestPageShowsRecommendations(t *testing.T) {
	url, c := setup(t, &recommendationService{}, defaultConfig())
	p, code := getPage(t, c, url+"/product/kettle")
	if code != 200 || p.Product != "kettle" || len(p.Recommendations) != 3 {
		t.Fatalf("%d %+v", code, p)
	}
}

// Invariant: a dependency slower than its 300 ms timeout costs the page
// its recommendations, not its answer: 200 with an empty list, and the
// slow call is cancelled on the dependency's side.
func TestPageRendersWhenDependencyIsSlow(t *testing.T) {
	svc := &recommendationService{latency: time.Hour}
	url, c := setup(t, svc, defaultConfig())
	start := time.Now()
	p, code := getPage(t, c, url+"/product/kettle")
	if code != 200 || p.Recommendations == nil || len(p.Recommendations) != 0 {
		t.Fatalf("%d %+v", code, p)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > waitBound {
		t.Fatalf("answered after %v", took)
	}
	waitFor(t, func() bool { return svc.cancelled.Load() == 1 })
}

// Invariant: the concurrency limiter admits 20 calls to the dependency and no more;
// the 21st page is answered at once with an empty list while the 20 wait,
// so a stuck dependency holds 20 goroutines, not the whole server.
func TestBulkheadShedsBeyondTwenty(t *testing.T) {
	svc := &recommendationService{release: make(chan struct{})}
	cfg := defaultConfig()
	cfg.recTimeout = waitBound // so only the limiter sheds here
	url, c := setup(t, svc, cfg)
	var wg sync.WaitGroup
	pages := make([]page, 20)
	for i := range 20 {
		wg.Go(func() { pages[i], _ = getPage(t, c, url+"/product/kettle") })
	}
	waitFor(t, func() bool { return svc.inflight.Load() == 20 })
	p, code := getPage(t, c, url+"/product/toaster")
	if code != 200 || len(p.Recommendations) != 0 || svc.inflight.Load() != 20 {
		t.Fatalf("21st page: %d %+v with %d in flight", code, p, svc.inflight.Load())
	}
	close(svc.release)
	wg.Wait()
	for i, p := range pages {
		if len(p.Recommendations) != 3 {
			t.Fatalf("page %d lost its recommendations: %+v", i, p)
		}
	}
	if svc.served.Load() != 20 {
		t.Fatalf("dependency served %d", svc.served.Load())
	}
}

// Invariant: a nested call made with nothing but the request's context
// stops when the inbound deadline passes; the client gets the 504.
func TestNestedCallStopsAtInboundDeadline(t *testing.T) {
	svc := &recommendationService{}
	cfg := defaultConfig()
	cfg.inboundTimeout = 200 * time.Millisecond // 5 s in the program; shortened to keep the test fast
	url, c := setup(t, svc, cfg)
	start := time.Now()
	resp, err := c.Get(url + "/report")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if took := time.Since(start); took < 200*time.Millisecond || took > waitBound {
		t.Fatalf("504 after %v", took)
	}
	waitFor(t, func() bool { return svc.cancelled.Load() == 1 })
}

// The program end to end: it prints where it listens, serves a page, and
// shuts down cleanly when its context ends.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-rec-latency", "0s"}, &out, io.Discard) }()
	var base string
	waitFor(t, func() bool {
		line, _, ok := strings.Cut(out.String(), "\n")
		base = strings.TrimPrefix(line, "listening on ")
		return ok
	})
	tr := &http.Transport{}
	p, code := getPage(t, &http.Client{Transport: tr}, base+"/product/kettle")
	tr.CloseIdleConnections()
	if code != 200 || len(p.Recommendations) != 3 {
		t.Fatalf("%d %+v", code, p)
	}
	cancel()
	select {
	case c := <-done:
		if c != 0 {
			t.Fatalf("exit code %d", c)
		}
	case <-time.After(waitBound):
		t.Fatal("run did not return")
	}
	if code := run(context.Background(), []string{"-rec-latency", "-1s"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("invalid flag: exit %d", code)
	}
}

// waitFor polls cond until it holds, for at most waitBound.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// syncBuffer is an io.Writer safe to read while run writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
