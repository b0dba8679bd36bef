package outbound

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/budget"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/throttle"
)

// Every retry carries its attempt number in AttemptHeader (and in
// grpc-previous-rpc-attempts for gRPC and Connect requests), first
// attempts carry neither, and the caller's header is never modified.
func TestTransportMarksRetries(t *testing.T) {
	for _, tc := range []struct {
		name string
		hdr  http.Header
		grpc bool
	}{
		{"http", http.Header{}, false},
		{"nil header", nil, false},
		{"grpc", http.Header{"Content-Type": {"application/grpc+proto"}}, true},
		{"connect", http.Header{"Connect-Protocol-Version": {"1"}, "Content-Type": {"application/proto"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got, gotGRPC []string
			base := baseFunc(func(r *http.Request) (*http.Response, error) {
				got = append(got, r.Header.Get(AttemptHeader))
				gotGRPC = append(gotGRPC, r.Header.Get(grpcAttemptsHeader))
				if len(got) < 3 {
					return response(503, "busy"), nil
				}
				return response(200, "ok"), nil
			})
			tr, err := New(Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddRetry(fastRetry(3)))})
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
			req.Header = tc.hdr
			resp, err := tr.RoundTrip(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%v %v", resp, err)
			}
			resp.Body.Close()
			if want := []string{"", "1", "2"}; !equal(got, want) {
				t.Errorf("%s: %q, want %q", AttemptHeader, got, want)
			}
			wantGRPC := []string{"", "", ""}
			if tc.grpc {
				wantGRPC = []string{"", "1", "2"}
			}
			if !equal(gotGRPC, wantGRPC) {
				t.Errorf("grpc-previous-rpc-attempts: %q, want %q", gotGRPC, wantGRPC)
			}
			if req.Header.Get(AttemptHeader) != "" {
				t.Error("the caller's header was modified")
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Pushback reads every form of server pushback the retry honours.
func TestPushback(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      int
		header    []string
		d         time.Duration
		ok, stops bool
	}{
		{"retry-after", 503, []string{"Retry-After", "3"}, 3 * time.Second, true, false},
		{"retry-after wins", 429, []string{"Retry-After", "2", "RateLimit-Remaining", "0", "RateLimit-Reset", "9"}, 2 * time.Second, true, false},
		{"grpc pushback", 200, []string{"Grpc-Retry-Pushback-Ms", "1500"}, 1500 * time.Millisecond, true, false},
		{"grpc do not retry", 200, []string{"Grpc-Retry-Pushback-Ms", "-1"}, 0, false, true},
		{"grpc malformed", 503, []string{"Grpc-Retry-Pushback-Ms", "soon"}, 0, false, true},
		{"ratelimit-reset", 429, []string{"RateLimit-Remaining", "0", "RateLimit-Reset", "7"}, 7 * time.Second, true, false},
		{"ratelimit with quota left is no pushback", 503, []string{"RateLimit-Remaining", "999", "RateLimit-Reset", "60"}, 0, false, false},
		{"ratelimit structured", 503, []string{"RateLimit", `"default";r=0;t=4`}, 4 * time.Second, true, false},
		{"ratelimit structured with quota left", 503, []string{"RateLimit", `"default";r=5;t=4`}, 0, false, false},
		{"ratelimit on a 200 is no pushback", 200, []string{"RateLimit-Remaining", "0", "RateLimit-Reset", "7"}, 0, false, false},
		{"ratelimit malformed", 429, []string{"RateLimit-Remaining", "0", "RateLimit-Reset", "-3"}, 0, false, false},
		{"none", 503, nil, 0, false, false},
	} {
		d, ok, stop := Pushback(response(tc.code, "", tc.header...))
		if d != tc.d || ok != tc.ok || stop != tc.stops {
			t.Errorf("%s: got %v %v %v, want %v %v %v", tc.name, d, ok, stop, tc.d, tc.ok, tc.stops)
		}
	}
	// gRPC's "do not retry" ends the retries: the response is returned.
	if ShouldRetry(DefaultMaxRetryWait)(resilience.Outcome[*http.Response]{Value: response(503, "", "Grpc-Retry-Pushback-Ms", "-1")}) {
		t.Error("ShouldRetry retries a response whose gRPC pushback says not to")
	}
}

// Refused decides what the throttle counts as refused: overload and
// timeouts, not client errors.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		o    resilience.Outcome[*http.Response]
		want bool
	}{
		{resilience.Outcome[*http.Response]{Value: response(503, "")}, true},
		{resilience.Outcome[*http.Response]{Value: response(429, "")}, true},
		{resilience.Outcome[*http.Response]{Value: response(502, "")}, true},
		{resilience.Outcome[*http.Response]{Value: response(504, "")}, true},
		{resilience.Outcome[*http.Response]{Err: &resilience.TimeoutRejectedError{}}, true},
		{resilience.Outcome[*http.Response]{Err: errors.New("connection refused")}, true},
		{resilience.Outcome[*http.Response]{Value: response(200, "")}, false},
		{resilience.Outcome[*http.Response]{Value: response(404, "")}, false},
		{resilience.Outcome[*http.Response]{Value: response(400, "")}, false},
		{resilience.Outcome[*http.Response]{Value: response(500, "")}, false},
		{resilience.Outcome[*http.Response]{Err: context.Canceled}, false},
		{resilience.Outcome[*http.Response]{Err: &throttle.ThrottledError{}}, false},
		{resilience.Outcome[*http.Response]{}, false},
		{resilience.Outcome[*http.Response]{Value: response(200, "", "Content-Type", "application/grpc", "Grpc-Status", "14")}, true},
		{resilience.Outcome[*http.Response]{Value: response(200, "", "Content-Type", "application/grpc+proto", "Grpc-Status", "4")}, true},
		{resilience.Outcome[*http.Response]{Value: response(200, "", "Content-Type", "application/grpc", "Grpc-Status", "5")}, false},
		{resilience.Outcome[*http.Response]{Value: response(200, "", "Content-Type", "application/json", "Grpc-Status", "14")}, false},
	} {
		if got := Refused(tc.o); got != tc.want {
			t.Errorf("Refused(%v, %v) = %v", tc.o.Value, tc.o.Err, got)
		}
	}
	for _, tc := range []struct {
		code string
		want bool
	}{{"14", true}, {"8", true}, {"4", false}, {"0", false}, {"x", false}} {
		o := resilience.Outcome[*http.Response]{Value: response(200, "", "Content-Type", "application/grpc", "Grpc-Status", tc.code)}
		if got := ShouldHandle(o); got != tc.want {
			t.Errorf("ShouldHandle(grpc-status %s) = %v", tc.code, got)
		}
	}
	if ShouldHandle(resilience.Outcome[*http.Response]{Err: &throttle.ThrottledError{}}) {
		t.Error("ShouldHandle handles a local throttling: it would be retried at once and throttled again")
	}
}

func TestNewRefusesBudgetBesideAPipeline(t *testing.T) {
	b, _ := budget.New(budget.Options{})
	th, _ := throttle.New(ThrottleOptions())
	p := pipeline(t, resilience.NewBuilder[*http.Response]())
	for _, o := range []Options{{Pipeline: p, Budget: b}, {Pipeline: p, Throttle: th}} {
		var ce *resilience.ConfigError
		if _, err := New(o); !errors.As(err, &ce) {
			t.Errorf("New(%+v) = %v, want a *ConfigError", o, err)
		}
	}
}

// Options.Budget and Options.Throttle shape the default pipeline: the
// retry draws on the budget and the throttle sees every attempt.
func TestDefaultPipelineUsesBudgetAndThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bu, _ := budget.New(budget.Options{MinPerSecond: -1})
		th, _ := throttle.New(ThrottleOptions())
		var calls atomic.Int32
		base := baseFunc(func(r *http.Request) (*http.Response, error) {
			calls.Add(1)
			return response(503, "busy"), nil
		})
		tr, err := New(Options{Base: base, Budget: bu, Throttle: th})
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}
		bs, ts := bu.Stats(), th.Stats()
		if bs.FirstAttempts != 20 || bs.Retries > 2 {
			t.Errorf("budget %+v, want 20 first attempts and at most 2 retries", bs)
		}
		if ts.Requests != 20+bs.Retries || ts.Accepts != 0 || int64(calls.Load()) != ts.Sent || ts.Throttled == 0 {
			t.Errorf("throttle %+v with %d attempts sent, want every attempt counted, none accepted", ts, calls.Load())
		}
	})
}

// TestTransportAgainstASheddingServer is the client side end to end on
// loopback: a server whose only permit is held sheds every request with
// a 503. Naive retries send four attempts per call; with a budget the
// retries on the wire are at most Ratio × the calls; with the throttle as
// well most calls are refused locally, without reaching the server, as
// *throttle.ThrottledError; and every retry that reaches the server is
// marked.
func TestTransportAgainstASheddingServer(t *testing.T) {
	m, err := inbound.New(inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	hold, held := make(chan struct{}), make(chan struct{})
	var firsts, marked atomic.Int64
	var once sync.Once
	inner := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			once.Do(func() { close(held) })
			<-hold
		}
	}))
	// Count what reaches the server, before the limiter sheds it.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(AttemptHeader) != "" {
			marked.Add(1)
		} else if r.URL.Path != "/hold" {
			firsts.Add(1)
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	holdDone := make(chan struct{})
	go func() {
		defer close(holdDone)
		resp, err := srv.Client().Get(srv.URL + "/hold")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-held
	defer func() { close(hold); <-holdDone }()

	const calls = 200
	run := func(bu *budget.Budget, th *throttle.Throttle[*http.Response]) (throttled int) {
		firsts.Store(0)
		marked.Store(0)
		ro := fastRetry(3)
		ro.Budget = bu
		b := resilience.NewBuilder[*http.Response]().AddRetry(ro)
		if th != nil {
			b.AddResultStrategy(th)
		}
		tr, err := New(Options{Base: srv.Client().Transport, Pipeline: pipeline(t, b)})
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: tr}
		for range calls {
			resp, err := client.Get(srv.URL + "/work")
			switch {
			case errors.Is(err, throttle.ErrThrottled):
				throttled++
			case err != nil:
				t.Fatal(err)
			default:
				if resp.StatusCode != http.StatusServiceUnavailable {
					t.Fatalf("status %d from a server that sheds everything", resp.StatusCode)
				}
				resp.Body.Close()
			}
		}
		return throttled
	}

	run(nil, nil)
	if f, r := firsts.Load(), marked.Load(); f != calls || r != 3*calls {
		t.Errorf("naive: %d first attempts and %d marked retries reached the server, want %d and %d", f, r, calls, 3*calls)
	}

	bu, _ := budget.New(budget.Options{Ratio: 0.1, MinPerSecond: -1, Window: time.Hour})
	run(bu, nil)
	if f, r := firsts.Load(), marked.Load(); f != calls || r != calls/10 {
		t.Errorf("budget: %d first attempts and %d marked retries reached the server, want %d and %d", f, r, calls, calls/10)
	}
	if s := bu.Stats(); s.Retries != calls/10 || s.Denied != calls { // every call is denied once
		t.Errorf("budget stats %+v", s)
	}

	bu, _ = budget.New(budget.Options{Ratio: 0.1, MinPerSecond: -1, Window: time.Hour})
	opts := ThrottleOptions()
	opts.Window = time.Hour
	opts.MinPerSecond = -1
	th, _ := throttle.New(opts)
	throttled := run(bu, th)
	f, r := firsts.Load(), marked.Load()
	if throttled < calls/2 || f >= calls/2 || r > calls/10 {
		t.Errorf("budget and throttle: %d calls refused locally, %d first attempts and %d retries reached the server", throttled, f, r)
	}
	if s := th.Stats(); s.Accepts != 0 || s.Sent != f+r || s.Throttled < uint64(throttled) {
		t.Errorf("throttle stats %+v with %d attempts on the wire", s, f+r)
	}
}

// trailerBody fills its response's trailers when read to its end, as
// net/http does.
type trailerBody struct {
	resp *http.Response
	vals http.Header
}

func (b *trailerBody) Read([]byte) (int, error) {
	for k, v := range b.vals {
		b.resp.Trailer[k] = v
	}
	return 0, io.EOF
}
func (b *trailerBody) Close() error { return nil }

// A gRPC error answered with an empty body and trailers is read before
// the retry decides: UNAVAILABLE is retried after its pushback, and the
// caller still gets the trailers of the response it is given.
func TestTransportReadsGRPCStatusFromTrailers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent []time.Time
		base := baseFunc(func(r *http.Request) (*http.Response, error) {
			sent = append(sent, time.Now())
			resp := &http.Response{StatusCode: 200, ContentLength: 0,
				Header:  http.Header{"Content-Type": {"application/grpc"}},
				Trailer: http.Header{"Grpc-Status": nil, "Grpc-Retry-Pushback-Ms": nil}}
			resp.Body = &trailerBody{resp: resp, vals: http.Header{"Grpc-Status": {"14"}, "Grpc-Retry-Pushback-Ms": {"1500"}}}
			return resp, nil
		})
		ro := RetryOptions()
		ro.MaxRetryAttempts = 1
		tr, err := New(Options{Base: base, Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddRetry(ro)), RetryNonIdempotent: true})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://example.test/pkg.S/M", nil)
		req.Header.Set("Content-Type", "application/grpc")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if len(sent) != 2 || sent[1].Sub(sent[0]) != 1500*time.Millisecond {
			t.Fatalf("attempts at %v, want two, 1.5 s apart", sent)
		}
		if resp.Trailer.Get("Grpc-Status") != "14" {
			t.Fatalf("the caller's trailers: %v", resp.Trailer)
		}
	})
}
