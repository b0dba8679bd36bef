package ready

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

func probe(r http.Handler, method string) (int, string) {
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(method, "/readyz", nil))
	return w.Code, w.Body.String()
}

// TestReadinessFailsAsSoonAsDrainStarts protects the shutdown order's
// first signal: the probe fails the moment Drain starts, while Drain is
// still waiting for a running handler, not when it returns.
func TestReadinessFailsAsSoonAsDrainStarts(t *testing.T) {
	m := mustNew(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2}})
	ready := New(m)
	if code, body := probe(ready, http.MethodGet); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("before Drain: %d %q", code, body)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(entered)
		<-release
	}))
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	<-entered
	drained := make(chan error, 1)
	go func() { drained <- m.Drain(context.Background()) }()
	for ready.Ready() {
		time.Sleep(time.Millisecond) // Drain's goroutine has not started yet
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) with a handler running", err)
	default:
	}
	if code, body := probe(ready, http.MethodGet); code != http.StatusServiceUnavailable || body != "shutting down\n" {
		t.Fatalf("while draining: %d %q", code, body)
	}
	close(release)
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if code, _ := probe(ready, http.MethodGet); code != http.StatusServiceUnavailable {
		t.Fatalf("after Drain: %d, want 503 for good", code)
	}
}

// TestReadinessFailBeforeDrain protects the step before draining: Fail
// turns the probe to 503 while the middleware still admits requests.
func TestReadinessFailBeforeDrain(t *testing.T) {
	m := mustNew(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2}})
	ready := New(m)
	ready.Fail()
	if code, _ := probe(ready, http.MethodGet); code != http.StatusServiceUnavailable {
		t.Fatalf("after Fail: %d, want 503", code)
	}
	w := httptest.NewRecorder()
	m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("served")) })).
		ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if w.Code != http.StatusOK || w.Body.String() != "served" {
		t.Fatalf("a request after Fail: %d %q, want it served", w.Code, w.Body.String())
	}
	if code, body := probe(ready, http.MethodHead); code != http.StatusServiceUnavailable || body != "" {
		t.Fatalf("HEAD: %d %q, want 503 without a body", code, body)
	}
}

// TestReadinessZeroValue: the zero value is a probe that is ready until
// Fail.
func TestReadinessZeroValue(t *testing.T) {
	var r Probe
	if !r.Ready() {
		t.Fatal("zero Readiness not ready")
	}
	r.Fail()
	if r.Ready() {
		t.Fatal("ready after Fail")
	}
}

// A readiness probe beside the middleware, failing at the first step of
// a shutdown, before the middleware drains.
func ExampleProbe() {
	mw, err := inbound.New(inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100}})
	if err != nil {
		panic(err)
	}
	ready := New(mw)
	mux := http.NewServeMux()
	mux.Handle("GET /readyz", ready) // outside the middleware
	mux.Handle("GET /", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	get := func(path string) string {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return fmt.Sprint(w.Code, " ", w.Body.String())
	}
	fmt.Print(get("/readyz"))
	ready.Fail() // SIGTERM: the balancer's probes fail from now
	fmt.Print(get("/readyz"))
	fmt.Print(get("/")) // still served until Drain
	// ... wait for the endpoints to update, then:
	mw.Drain(context.Background())
	fmt.Print(get("/"))
	// Output:
	// 200 ready
	// 503 shutting down
	// 200 hello
	// 503 {"statusCode":503,"error":"Service Unavailable","message":"The server is shutting down; retry later.","code":"BULKHEAD_FULL","reason":"shutting-down"}
}

func mustNew(t *testing.T, opts inbound.Options) *inbound.Middleware {
	t.Helper()
	m, err := inbound.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Invariant 4: no goroutine or timer outlives the request that made it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
