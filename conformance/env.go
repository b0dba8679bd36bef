package conformance

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Bounds on waiting. Every wait in the suite is for a state (a request
// queued, a handler entered, permits returned), polled with a short tick
// up to a deadline generous enough for a loaded 2-core machine running
// the race detector. A wait that hits the deadline is a failure, never a
// pass.
const (
	waitDeadline = 10 * time.Second
	pollTick     = 2 * time.Millisecond
	// requestDeadline bounds any single client request made by a case.
	requestDeadline = 20 * time.Second
)

// env is a case's view of the harness: it starts servers and cleans up
// after them.
type env struct {
	t *caseT
	h Harness

	mu    sync.Mutex
	gates []*gate
	// Requests started with send, by id: how many were sent and how many
	// answered. A request whose every send is answered can no longer
	// enter a handler or a queue, so a wait for that fails at once.
	sent, answered map[string]int
}

// requestID is the id query parameter the suite's requests carry.
func requestID(path string) string {
	if i := strings.Index(path, "id="); i >= 0 {
		id := path[i+3:]
		if j := strings.IndexByte(id, '&'); j >= 0 {
			id = id[:j]
		}
		return id
	}
	return ""
}

func (e *env) noteSent(id string) {
	e.mu.Lock()
	if e.sent == nil {
		e.sent, e.answered = map[string]int{}, map[string]int{}
	}
	e.sent[id]++
	e.mu.Unlock()
}

func (e *env) noteAnswered(id string) {
	e.mu.Lock()
	e.answered[id]++
	e.mu.Unlock()
}

// allAnswered reports whether request id was sent and every send of it
// has been answered.
func (e *env) allAnswered(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sent[id] > 0 && e.answered[id] >= e.sent[id]
}

// server is a started harness server plus the client the case uses.
type server struct {
	*Server
	t      *caseT
	e      *env
	client *http.Client
	fresh  *http.Client // one connection per request
	app    *appTracker
	reqs   sync.WaitGroup // client requests started with send

	// abort ends every client request still open, so that a failed case
	// does not wait for answers that can no longer change its outcome.
	abortCtx context.Context
	abort    context.CancelFunc
}

// appTracker wraps the case's handler to count handlers running inside
// the middleware: the concurrency the permit limit must bound, and whether
// every handler has returned.
//
// It also catches a middleware that is not in front of the handler at all
// (or a Server.Stats that reads another middleware): under a concurrency
// limit every handler runs holding a permit, so a handler that starts
// while Stats count nothing in flight decides the case at once, instead
// of every wait for a queue, a 503 or a 504 running to its bound.
type appTracker struct {
	next      http.Handler
	active    atomic.Int64
	maxActive atomic.Int64
	started   atomic.Int64

	t        *caseT
	limited  bool                                 // the configuration has a limiter Stats reports
	stats    atomic.Pointer[func() inbound.Stats] // set once Start has returned
	reported atomic.Bool
}

func (a *appTracker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if st := a.stats.Load(); a.limited && st != nil && (*st)().InFlight == 0 && a.reported.CompareAndSwap(false, true) {
		a.t.Errorf("a handler started (%s %s) while the middleware's Stats counted nothing in flight: "+
			"the adapter's middleware is not in front of Config.Handler, or Server.Stats reads another middleware's counters", r.Method, r.URL.RequestURI())
	}
	a.started.Add(1)
	n := a.active.Add(1)
	for {
		m := a.maxActive.Load()
		if n <= m || a.maxActive.CompareAndSwap(m, n) {
			break
		}
	}
	defer a.active.Add(-1) // deferred: a panicking handler still leaves
	a.next.ServeHTTP(w, r)
}

var healthHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "ok")
})

// start serves h behind the adapter configured by opts. At the end of the
// case it opens the case's gates, waits for the case's requests and
// handlers to finish, then closes the client and the server.
func (e *env) start(opts inbound.Options, h http.Handler) *server {
	e.t.Helper()
	app := &appTracker{next: h, t: e.t,
		limited: opts.Concurrency != nil || opts.Adaptive != nil || (opts.Pipeline != nil && opts.LimiterStats != nil)}
	srv, err := e.h.Start(Config{Options: opts, Handler: app, Health: healthHandler})
	if err != nil {
		e.t.Fatalf("Harness.Start: %v", err)
	}
	if srv == nil || srv.Stats == nil || srv.Close == nil || srv.URL == "" {
		e.t.Fatalf("Harness.Start returned an incomplete Server (URL, Stats and Close are required)")
	}
	app.stats.Store(&srv.Stats)
	tr := &http.Transport{
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	freshTr := &http.Transport{DisableKeepAlives: true, DisableCompression: true}
	s := &server{Server: srv, t: e.t, e: e, client: &http.Client{Transport: tr},
		fresh: &http.Client{Transport: freshTr}, app: app}
	s.abortCtx, s.abort = context.WithCancel(context.Background())
	e.t.Cleanup(func() {
		defer s.abort()
		// Open every gate first, including those made before the server.
		e.mu.Lock()
		for _, g := range e.gates {
			g.open()
		}
		e.mu.Unlock()
		if e.t.Failed() {
			// The outcome is decided: answers still owed cannot change it.
			s.abort()
		}
		if !waitGroupWithin(&s.reqs, waitDeadline) {
			e.t.Errorf("client requests still pending %v after the case ended", waitDeadline)
		}
		if !pollUntil(func() bool { return app.active.Load() == 0 }) {
			e.t.Errorf("%d handlers still running %v after the case ended (a handler outlives its request)", app.active.Load(), waitDeadline)
		}
		tr.CloseIdleConnections()
		freshTr.CloseIdleConnections()
		srv.Close()
	})
	return s
}

// gate holds handlers until opened. Every gate is opened when the case
// ends, so a failing case never strands a handler.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func (e *env) gate() *gate {
	g := &gate{ch: make(chan struct{})}
	e.mu.Lock()
	e.gates = append(e.gates, g)
	e.mu.Unlock()
	e.t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// result is what a client request produced.
type result struct {
	status  int
	header  http.Header
	body    []byte
	err     error
	elapsed time.Duration
	// close: the response said Connection: close (net/http's client
	// removes the field from header and sets Response.Close).
	close bool
}

func (r result) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	return fmt.Sprintf("%d %q", r.status, truncate(string(r.body), 200))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// req describes a client request.
type req struct {
	method string // default GET
	path   string
	header map[string]string
	body   string // sent with Content-Length when non-empty
	ctx    context.Context
	// fresh sends the request on a new connection that is closed after
	// it. Needed after a 504 whose handler still runs: that connection
	// is busy until the handler returns, and a request reusing it would
	// wait for the handler instead of testing the middleware.
	fresh bool
}

func (s *server) newRequest(q req) (*http.Request, context.CancelFunc) {
	s.t.Helper()
	ctx := q.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, requestDeadline)
	stop := context.AfterFunc(s.abortCtx, cancelTimeout)
	stopDecided := context.AfterFunc(s.t.Decided(), cancelTimeout)
	cancel := func() { stop(); stopDecided(); cancelTimeout() }
	method := q.method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	r, err := http.NewRequestWithContext(ctx, method, s.URL+q.path, body)
	if err != nil {
		cancel()
		s.t.Fatalf("building request %s %s: %v", method, q.path, err)
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	return r, cancel
}

// do sends q and reads the whole response.
func (s *server) do(q req) result {
	s.t.Helper()
	r, cancel := s.newRequest(q)
	defer cancel()
	c := s.client
	if q.fresh {
		c = s.fresh
	}
	start := time.Now()
	resp, err := c.Do(r)
	if err != nil {
		return result{err: s.stoppedErr(err), elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: body, err: s.stoppedErr(err), elapsed: time.Since(start), close: resp.Close}
}

// stoppedErr says so when a request failed because the case had already
// failed, so that the checks it then fails do not read as new findings.
func (s *server) stoppedErr(err error) error {
	if err != nil && s.t.Decided().Err() != nil {
		return errStopped
	}
	return err
}

// send starts q on its own goroutine; the result arrives on the channel.
func (s *server) send(q req) <-chan result {
	ch := make(chan result, 1)
	id := requestID(q.path)
	s.e.noteSent(id)
	s.reqs.Add(1)
	go func() {
		defer s.reqs.Done()
		r := s.do(q)
		s.e.noteAnswered(id)
		ch <- r
	}()
	return ch
}

// await returns the result of a request started with send, or fails the
// case after waitDeadline.
func (s *server) await(what string, ch <-chan result) result {
	s.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-s.t.Decided().Done():
		s.t.stopWaiting(what)
	case <-time.After(waitDeadline):
		s.t.Fatalf("%s: no response within %v", what, waitDeadline)
	}
	return result{}
}

// pending asserts that a request started with send has not been answered
// yet (the caller knows it must still be held), without waiting.
func (s *server) pending(what string, ch <-chan result) {
	s.t.Helper()
	select {
	case r := <-ch:
		s.t.Errorf("%s: answered early with %v; it should still be held", what, r)
	default:
	}
}

// waitStats waits until cond holds for the middleware's stats.
func (s *server) waitStats(what string, cond func(inbound.Stats) bool) {
	s.t.Helper()
	var last inbound.Stats
	switch s.t.poll(func() bool { last = s.Stats(); return cond(last) }) {
	case pollStopped:
		s.t.stopWaiting("waiting for " + what)
	case pollTimedOut:
		s.t.Fatalf("waiting for %s: still %+v after %v", what, last, waitDeadline)
	}
}

// waitQueued waits until n requests are queued, the last being request
// id. It fails at once when the outcome is decided otherwise: request id
// was answered, or a request entered the handler (none may while the
// permits are held and requests queue).
func (s *server) waitQueued(id string, n int) {
	s.t.Helper()
	started := s.app.started.Load()
	var last inbound.Stats
	decided := ""
	outcome := s.t.poll(func() bool {
		last = s.Stats()
		if last.Queued == n {
			return true
		}
		if s.e.allAnswered(id) {
			decided = "it was answered instead"
		} else if now := s.app.started.Load(); now != started {
			decided = "a request entered the handler instead"
		}
		return decided != ""
	})
	switch {
	case outcome == pollStopped:
		s.t.stopWaiting(fmt.Sprintf("waiting for request %s queued", id))
	case decided != "":
		s.t.Fatalf("waiting for request %s queued (%d queued): %s; stats %+v", id, n, decided, last)
	case outcome == pollTimedOut:
		s.t.Fatalf("waiting for request %s queued (%d queued): still %+v after %v", id, n, last, waitDeadline)
	}
}

// waitIdle waits until no permit is held and nobody is queued: invariant 2,
// a permit or queue place is never lost.
func (s *server) waitIdle(what string) {
	s.t.Helper()
	var last inbound.Stats
	switch s.t.poll(func() bool { last = s.Stats(); return last.InFlight == 0 && last.Queued == 0 }) {
	case pollStopped:
		s.t.stopWaiting(what + ": waiting for in flight and queued to return to zero")
	case pollTimedOut:
		s.t.Errorf("%s: in flight and queued must return to zero, still %+v after %v", what, last, waitDeadline)
	}
}

// receive waits for a value on ch.
func receive[V any](t *caseT, what string, ch <-chan V) V {
	t.Helper()
	var zero V
	select {
	case v := <-ch:
		return v
	case <-t.Decided().Done():
		t.stopWaiting(what)
	case <-time.After(waitDeadline):
		t.Fatalf("%s: nothing after %v", what, waitDeadline)
	}
	return zero
}

// How a case's poll ended.
const (
	pollMet      = iota // the condition holds
	pollStopped         // the case failed meanwhile: its outcome is decided
	pollTimedOut        // waitDeadline passed
)

// poll waits for cond like pollUntil, and stops as soon as the case has
// failed.
func (t *caseT) poll(cond func() bool) int {
	decided := t.Decided()
	deadline := time.Now().Add(waitDeadline)
	for {
		if cond() {
			return pollMet
		}
		if decided.Err() != nil {
			return pollStopped
		}
		if time.Now().After(deadline) {
			return pollTimedOut
		}
		time.Sleep(pollTick)
	}
}

// pollUntil waits for cond up to waitDeadline, whatever the case's
// outcome: for the cleanups, which must see handlers end.
func pollUntil(cond func() bool) bool {
	deadline := time.Now().Add(waitDeadline)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollTick)
	}
}

func waitGroupWithin(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func expectOK(t *caseT, what string, r result, body string) {
	t.Helper()
	if r.err != nil || r.status != http.StatusOK {
		t.Errorf("%s: want 200, got %v", what, r)
		return
	}
	if body != "" && string(r.body) != body {
		t.Errorf("%s: body %q, want %q", what, r.body, body)
	}
}

// goroutineStacks returns every goroutine's stack, for leak reports.
func goroutineStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
