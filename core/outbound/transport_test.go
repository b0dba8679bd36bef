package outbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// baseFunc adapts a function to http.RoundTripper.
type baseFunc func(*http.Request) (*http.Response, error)

func (f baseFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// closeCounter counts Close calls on a body.
type closeCounter struct {
	io.ReadCloser
	n *atomic.Int32
}

func (c *closeCounter) Close() error {
	c.n.Add(1)
	return c.ReadCloser.Close()
}

func response(code int, body string, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

// fastRetry is RetryOptions without the real-time delays, for loopback
// tests (real network I/O cannot run on synctest's fake clock).
func fastRetry(attempts int) resilience.RetryOptions[*http.Response] {
	o := RetryOptions()
	o.MaxRetryAttempts = attempts
	o.Delay = 0
	o.DelayGenerator = nil
	return o
}

func pipeline(t *testing.T, b *resilience.Builder[*http.Response]) *resilience.Pipeline[*http.Response] {
	t.Helper()
	p, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// loopback starts a server and returns a client transport to it whose
// response bodies are counted when closed.
func loopback(t *testing.T, h http.HandlerFunc) (*httptest.Server, http.RoundTripper, *atomic.Int32) {
	t.Helper()
	srv := httptest.NewServer(h)
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	closed := &atomic.Int32{}
	base := baseFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := tr.RoundTrip(r)
		if resp != nil {
			resp.Body = &closeCounter{ReadCloser: resp.Body, n: closed}
		}
		return resp, err
	})
	return srv, base, closed
}

// Invariant: 5xx and 429 are retried, every response retried away is
// closed, and the final response reaches the caller readable.
func TestTransportRetriesHandledStatusAndReleasesBodies(t *testing.T) {
	var calls atomic.Int32
	srv, base, closed := loopback(t, func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			io.WriteString(w, "ok")
		}
	})
	tr, err := New(Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddRetry(fastRetry(3)))})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" || calls.Load() != 3 {
		t.Fatalf("status %d body %q after %d calls", resp.StatusCode, body, calls.Load())
	}
	if closed.Load() != 3 { // two retried away, one by the caller
		t.Fatalf("%d bodies closed, want 3", closed.Load())
	}
}

// Invariant: only requests that are safe to repeat are repeated: idempotent
// methods, an Idempotency-Key, or an explicit opt-in, and never a body
// that cannot be replayed; a replayed body arrives whole every time.
func TestTransportRepeatsOnlySafeRequests(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv, base, _ := loopback(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusBadGateway)
	})
	p := pipeline(t, resilience.NewBuilder[*http.Response]().AddRetry(fastRetry(2)))
	cases := []struct {
		name      string
		method    string
		body      func() io.Reader
		key       bool
		anyMethod bool
		calls     int
	}{
		{"GET", http.MethodGet, nil, false, false, 3},
		{"DELETE", http.MethodDelete, nil, false, false, 3},
		{"POST", http.MethodPost, func() io.Reader { return strings.NewReader("payload") }, false, false, 1},
		{"POST with Idempotency-Key", http.MethodPost, func() io.Reader { return strings.NewReader("payload") }, true, false, 3},
		{"POST opted in", http.MethodPost, func() io.Reader { return strings.NewReader("payload") }, false, true, 3},
		{"PUT unreplayable body", http.MethodPut, func() io.Reader { return io.MultiReader(strings.NewReader("payload")) }, false, true, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			bodies = nil
			mu.Unlock()
			tr, _ := New(Options{Base: base, Pipeline: p, RetryNonIdempotent: c.anyMethod})
			var body io.Reader
			if c.body != nil {
				body = c.body()
			}
			req, _ := http.NewRequest(c.method, srv.URL, body)
			if c.key {
				req.Header.Set("Idempotency-Key", "k1")
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode != http.StatusBadGateway || len(bodies) != c.calls {
				t.Fatalf("status %d after %d calls, want %d", resp.StatusCode, len(bodies), c.calls)
			}
			for _, b := range bodies {
				if c.body != nil && b != "payload" {
					t.Fatalf("bodies %q", bodies)
				}
			}
		})
	}
}

// Invariant: a Retry-After header sets the wait before the next attempt
// (measured on the fake clock).
func TestTransportHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Duration
		start := time.Now()
		base := baseFunc(func(r *http.Request) (*http.Response, error) {
			at = append(at, time.Since(start))
			if len(at) == 1 {
				return response(503, "busy", "Retry-After", "3"), nil
			}
			return response(200, "ok"), nil
		})
		tr, _ := New(Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddRetry(RetryOptions()))})
		req, _ := http.NewRequest(http.MethodGet, "http://dependency.test/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatal(resp, err)
		}
		if fmt.Sprint(at) != "[0s 3s]" {
			t.Fatalf("attempts at %v, want [0s 3s]", at)
		}
	})
}

func TestDelayGenerator(t *testing.T) {
	now := time.Now()
	date := now.Add(90 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		o    resilience.Outcome[*http.Response]
		min  time.Duration
		max  time.Duration
		want bool
	}{
		{resilience.Outcome[*http.Response]{Value: response(429, "", "Retry-After", "7")}, 7 * time.Second, 7 * time.Second, true},
		{resilience.Outcome[*http.Response]{Value: response(503, "", "Retry-After", date)}, 88 * time.Second, 90 * time.Second, true},
		{resilience.Outcome[*http.Response]{Value: response(503, "")}, 0, 0, false},
		{resilience.Outcome[*http.Response]{Err: &resilience.RateLimitRejectedError{RetryAfter: time.Second}}, time.Second, time.Second, true},
	}
	for i, c := range cases {
		d, ok := DelayGenerator(context.Background(), resilience.RetryArgs[*http.Response]{Outcome: c.o})
		if ok != c.want || d < c.min || d > c.max {
			t.Errorf("case %d: %v, %v", i, d, ok)
		}
	}
}

// Invariant: the request's deadline is the pipeline's: attempts see it, a
// retry delay that would outlast it is not waited, and a hung server is
// abandoned at it.
func TestTransportRequestDeadlineFlowsThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		want, _ := ctx.Deadline()
		calls := 0
		base := baseFunc(func(r *http.Request) (*http.Response, error) {
			calls++
			if dl, ok := r.Context().Deadline(); !ok || !dl.Equal(want) {
				t.Errorf("attempt deadline %v, want %v", dl, want)
			}
			return response(503, "busy"), nil
		})
		ro := RetryOptions()
		ro.UseJitter = false // a jittered first delay can be short enough to fit
		tr, _ := New(Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddRetry(ro))})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://dependency.test/", nil)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 503 || calls != 1 || time.Since(start) != 0 {
			t.Fatalf("got %v, %v after %d calls in %v", resp, err, calls, time.Since(start))
		}
	})
	// The same over loopback, with a server that hangs until the client
	// goes away.
	gone := make(chan struct{})
	srv, base, _ := loopback(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		close(gone)
	})
	tr, _ := New(Options{Base: base})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	start := time.Now()
	_, err := (&http.Client{Transport: tr}).Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if took := time.Since(start); took > 10*time.Second { // bounded sanity check only
		t.Fatalf("took %v", took)
	}
	<-gone // the server saw the cancellation
}

// Invariant: a circuit opened by 5xx responses rejects without calling
// the dependency, and the request body that no attempt took is closed.
func TestTransportCircuitBreakerOpensOn5xx(t *testing.T) {
	calls := 0
	base := baseFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		if r.Body != nil {
			r.Body.Close()
		}
		return response(500, "down"), nil
	})
	cbo := CircuitBreakerOptions()
	cbo.FailureRatio, cbo.MinimumThroughput = 1, 2
	cb, err := resilience.NewCircuitBreaker(cbo)
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := New(Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddResultStrategy(cb))})
	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, "http://dependency.test/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 500 {
			t.Fatal(resp, err)
		}
		resp.Body.Close()
	}
	var closed atomic.Int32
	req, _ := http.NewRequest(http.MethodPost, "http://dependency.test/", &closeCounter{ReadCloser: io.NopCloser(strings.NewReader("x")), n: &closed})
	_, err = tr.RoundTrip(req)
	if !errors.Is(err, resilience.ErrBrokenCircuit) || calls != 2 || closed.Load() != 1 {
		t.Fatalf("err %v, %d calls, body closed %d times", err, calls, closed.Load())
	}
}

// resultFunc is a ResultStrategy made of a function.
type resultFunc func(context.Context, resilience.ResultNext[*http.Response]) (*http.Response, error)

func (f resultFunc) ExecuteResult(ctx context.Context, _ resilience.Telemetry, next resilience.ResultNext[*http.Response]) (*http.Response, error) {
	return f(ctx, next)
}

// Invariant: the caller gets exactly one of a response and an error; a
// response that comes with an error is released.
func TestTransportResponseOrError(t *testing.T) {
	var closed atomic.Int32
	both := resultFunc(func(context.Context, resilience.ResultNext[*http.Response]) (*http.Response, error) {
		r := response(200, "x")
		r.Body = &closeCounter{ReadCloser: r.Body, n: &closed}
		return r, errors.New("and an error")
	})
	tr, _ := New(Options{Base: http.DefaultTransport, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddResultStrategy(both))})
	req, _ := http.NewRequest(http.MethodGet, "http://dependency.test/", nil)
	if resp, err := tr.RoundTrip(req); resp != nil || err == nil || closed.Load() != 1 {
		t.Fatalf("got %v, %v; closed %d", resp, err, closed.Load())
	}
	fb := pipeline(t, resilience.NewBuilder[*http.Response]().AddFallback(resilience.FallbackOptions[*http.Response]{}))
	tr, _ = New(Options{Base: baseFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("refused") }), Pipeline: fb})
	if resp, err := tr.RoundTrip(req); resp != nil || !errors.Is(err, ErrNoResponse) {
		t.Fatalf("got %v, %v", resp, err)
	}
}

// Invariant: a strategy that repeats an unreplayable request anyway gets
// ErrBodyNotReplayable, not a half-sent body.
func TestTransportRefusesToReplayUnreplayableBody(t *testing.T) {
	twice := resultFunc(func(ctx context.Context, next resilience.ResultNext[*http.Response]) (*http.Response, error) {
		next(ctx)
		return next(ctx)
	})
	base := baseFunc(func(r *http.Request) (*http.Response, error) { return response(200, ""), nil })
	tr, _ := New(Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddResultStrategy(twice))})
	req, _ := http.NewRequest(http.MethodPut, "http://dependency.test/", io.MultiReader(strings.NewReader("x")))
	if _, err := tr.RoundTrip(req); !errors.Is(err, ErrBodyNotReplayable) {
		t.Fatalf("err = %v", err)
	}
}

// Invariant: the default pipeline is Polly's HTTP retry: 3 retries with
// exponential backoff and jitter from 2 s.
func TestTransportDefaultPipeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		base := baseFunc(func(r *http.Request) (*http.Response, error) { calls++; return response(503, ""), nil })
		tr, err := New(Options{Base: base})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://dependency.test/", nil)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 503 || calls != 4 || time.Since(start) < 3*time.Second {
			t.Fatalf("got %v, %v after %d calls in %v", resp, err, calls, time.Since(start))
		}
	})
}

// Invariant: hedged HTTP attempts release the responses that lose.
func TestTransportHedgingReleasesLosers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var closed atomic.Int32
		var n atomic.Int32
		base := baseFunc(func(r *http.Request) (*http.Response, error) {
			if n.Add(1) == 1 {
				time.Sleep(time.Second)
				resp := response(200, "slow")
				resp.Body = &closeCounter{ReadCloser: resp.Body, n: &closed}
				return resp, nil
			}
			return response(200, "fast"), nil
		})
		ho := HedgingOptions()
		ho.Delay = 100 * time.Millisecond
		tr, _ := New(Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddHedging(ho))})
		req, _ := http.NewRequest(http.MethodGet, "http://dependency.test/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "fast" || closed.Load() != 1 {
			t.Fatalf("body %q, loser closed %d", b, closed.Load())
		}
	})
}

func TestShouldHandle(t *testing.T) {
	cases := []struct {
		o    resilience.Outcome[*http.Response]
		want bool
	}{
		{resilience.Outcome[*http.Response]{Value: response(200, "")}, false},
		{resilience.Outcome[*http.Response]{Value: response(404, "")}, false},
		{resilience.Outcome[*http.Response]{Value: response(408, "")}, true},
		{resilience.Outcome[*http.Response]{Value: response(429, "")}, true},
		{resilience.Outcome[*http.Response]{Value: response(500, "")}, true},
		{resilience.Outcome[*http.Response]{Value: response(504, "")}, true},
		{resilience.Outcome[*http.Response]{Err: errors.New("connection refused")}, true},
		{resilience.Outcome[*http.Response]{Err: context.Canceled}, false},
	}
	for i, c := range cases {
		if got := ShouldHandle(c.o); got != c.want {
			t.Errorf("case %d: %v", i, got)
		}
	}
}

// Invariant: a handled response superseded by a hedge that wins is
// released: a fast 503 followed by a winning 200 closes the 503's body.
func TestTransportHedgingReleasesSupersededFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var closed atomic.Int32
		var n atomic.Int32
		base := baseFunc(func(r *http.Request) (*http.Response, error) {
			if n.Add(1) == 1 {
				resp := response(503, "busy")
				resp.Body = &closeCounter{ReadCloser: resp.Body, n: &closed}
				return resp, nil
			}
			time.Sleep(100 * time.Millisecond)
			return response(200, "ok"), nil
		})
		tr, _ := New(Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddHedging(HedgingOptions()))})
		req, _ := http.NewRequest(http.MethodGet, "http://dependency.test/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatal(resp, err)
		}
		resp.Body.Close()
		if closed.Load() != 1 {
			t.Fatalf("503 body closed %d times, want 1", closed.Load())
		}
	})
}

// ctxBody is a response body tied to its attempt's context, as a real
// transport's is: reading fails once that context is cancelled.
type ctxBody struct {
	ctx context.Context
	r   io.Reader
}

func (b *ctxBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.r.Read(p)
}

func (b *ctxBody) Close() error { return nil }

// Invariant: the hedged winner's body stays readable after RoundTrip, and
// its attempt context is released when the body is closed or read to the
// end; the loser's context is cancelled at once.
func TestTransportHedgingWinnerBodyReadableUntilClosed(t *testing.T) {
	for _, finish := range []string{"close", "eof"} {
		t.Run(finish, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				ctxs := map[string]context.Context{}
				base := baseFunc(func(r *http.Request) (*http.Response, error) {
					mu.Lock()
					first := len(ctxs) == 0
					name := map[bool]string{true: "loser", false: "winner"}[first]
					ctxs[name] = r.Context()
					mu.Unlock()
					if first {
						<-r.Context().Done()
						return nil, r.Context().Err()
					}
					return &http.Response{StatusCode: 200, Header: http.Header{}, Body: &ctxBody{ctx: r.Context(), r: strings.NewReader("streamed")}}, nil
				})
				ho := HedgingOptions()
				ho.Delay = 100 * time.Millisecond
				tr, _ := New(Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddHedging(ho))})
				req, _ := http.NewRequest(http.MethodGet, "http://dependency.test/", nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				if ctxs["loser"].Err() == nil || ctxs["winner"].Err() != nil {
					t.Fatalf("loser ctx %v, winner ctx %v", ctxs["loser"].Err(), ctxs["winner"].Err())
				}
				if finish == "eof" {
					b, err := io.ReadAll(resp.Body)
					if err != nil || string(b) != "streamed" {
						t.Fatalf("body %q, %v", b, err)
					}
				} else {
					resp.Body.Close()
				}
				if ctxs["winner"].Err() == nil {
					t.Fatal("winner's context not released")
				}
			})
		})
	}
}

// countingParent is a long-lived caller context that counts the children
// still registered on it (context.WithCancel registers through AfterFunc
// on a parent of a type it does not know).
type countingParent struct {
	context.Context
	done chan struct{}
	live atomic.Int64
}

func (p *countingParent) Done() <-chan struct{} { return p.done }
func (p *countingParent) Err() error            { return nil }

func (p *countingParent) AfterFunc(func()) func() bool {
	p.live.Add(1)
	var once sync.Once
	return func() bool {
		stopped := false
		once.Do(func() { p.live.Add(-1); stopped = true })
		return stopped
	}
}

// Invariant 4: hedged requests under one long-lived context leave nothing
// registered on it once their bodies are closed.
func TestTransportHedgingLeavesNothingOnParent(t *testing.T) {
	parent := &countingParent{Context: context.Background(), done: make(chan struct{})}
	base := baseFunc(func(r *http.Request) (*http.Response, error) { return response(200, "ok"), nil })
	tr, _ := New(Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddHedging(HedgingOptions()))})
	for range 2000 {
		req, _ := http.NewRequestWithContext(parent, http.MethodGet, "http://dependency.test/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := parent.live.Load(); n != 0 {
		t.Fatalf("%d contexts still registered on the parent", n)
	}
}

// Invariant: the default retry never waits longer than
// DefaultMaxRetryWait: a longer Retry-After ends the retries and its
// response is returned at once, readable; one within the cap is waited.
func TestTransportRetryAfterBeyondCapIsReturned(t *testing.T) {
	if o := RetryOptions(); o.MaxDelay != DefaultMaxRetryWait {
		t.Fatalf("MaxDelay %v", o.MaxDelay)
	}
	cases := []struct {
		retryAfter string
		calls      int
		took       time.Duration
	}{
		{"86400", 1, 0},
		{"31", 1, 0},
		{time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC).Format(http.TimeFormat), 1, 0}, // a day after the bubble's epoch
		{"30", 2, 30 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.retryAfter, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				base := baseFunc(func(r *http.Request) (*http.Response, error) {
					calls++
					if calls == 1 {
						return response(503, "come back later", "Retry-After", c.retryAfter), nil
					}
					return response(200, "ok"), nil
				})
				tr, _ := New(Options{Base: base})
				req, _ := http.NewRequest(http.MethodGet, "http://dependency.test/", nil)
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if calls != c.calls || time.Since(start) != c.took {
					t.Fatalf("%d calls in %v, want %d in %v", calls, time.Since(start), c.calls, c.took)
				}
				if c.calls == 1 && (resp.StatusCode != 503 || string(b) != "come back later" || resp.Header.Get("Retry-After") != c.retryAfter) {
					t.Fatalf("status %d body %q", resp.StatusCode, b)
				}
			})
		})
	}
}

// Invariant: a fallback built with FallbackOptions releases the response
// it replaces; a nil action answers with ErrNoResponse.
func TestTransportFallbackReleasesReplacedResponse(t *testing.T) {
	var closed atomic.Int32
	base := baseFunc(func(r *http.Request) (*http.Response, error) {
		resp := response(503, "down")
		resp.Body = &closeCounter{ReadCloser: resp.Body, n: &closed}
		return resp, nil
	})
	var sawStatus int
	fo := FallbackOptions(func(_ context.Context, o resilience.Outcome[*http.Response]) (*http.Response, error) {
		sawStatus = o.Value.StatusCode
		return response(200, "cached"), nil
	})
	tr, _ := New(Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddFallback(fo))})
	req, _ := http.NewRequest(http.MethodGet, "http://dependency.test/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "cached" || sawStatus != 503 || closed.Load() != 1 {
		t.Fatalf("body %q, action saw %d, replaced body closed %d times", b, sawStatus, closed.Load())
	}
	tr, _ = New(Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddFallback(FallbackOptions(nil)))})
	if _, err := tr.RoundTrip(req); !errors.Is(err, ErrNoResponse) || closed.Load() != 2 {
		t.Fatalf("nil action: %v, closed %d", err, closed.Load())
	}
}
