package inbound

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/ratelimit"
	"pgregory.net/rapid"
)

// reconfBase is a middleware's options with every live part set.
func reconfBase() Options {
	return Options{
		Timeout: 2 * time.Second,
		Concurrency: &resilience.ConcurrencyLimiterOptions{
			PermitLimit: 4, QueueLimit: 2, QueueTimeout: time.Second,
			Priority: func(context.Context) int { return 0 },
		},
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 100, Window: time.Second},
	}
}

// Each invalid field is refused with a *resilience.ConfigError naming it,
// counted as refused, and the old configuration stays wholly in force:
// the limit, the settings and the options read back the same.
func TestReconfigureRefusesInvalidFieldKeepsOld(t *testing.T) {
	for _, tc := range []struct {
		field   string
		notLive bool
		change  func(o *Options)
	}{
		{"Options.Timeout", false, func(o *Options) { o.Timeout = -time.Second }},
		{"Options.Shadow.Concurrency", false, func(o *Options) { o.Shadow.Concurrency = 101 }},
		{"ConcurrencyLimiterOptions.PermitLimit", false, func(o *Options) { o.Concurrency.PermitLimit = -3 }},
		{"ConcurrencyLimiterOptions.QueueLimit", false, func(o *Options) { o.Concurrency.QueueLimit = -1 }},
		{"ConcurrencyLimiterOptions.QueueTimeout", false, func(o *Options) { o.Concurrency.QueueTimeout = -time.Second }},
		{"ConcurrencyLimiterOptions.Overflow", false, func(o *Options) { o.Concurrency.Overflow = "drop-newest" }},
		{"RateLimiterOptions.PermitLimit", false, func(o *Options) { o.RateLimit.PermitLimit = 0 }},
		{"RateLimiterOptions.Window", false, func(o *Options) { o.RateLimit.Window = 0 }},
		// An invalid field after a valid change: nothing of either applies.
		{"RateLimiterOptions.Window", false, func(o *Options) { o.Concurrency.PermitLimit = 9; o.RateLimit.Window = -1 }},
		// Parts that cannot change live.
		{"Options.Timeout", true, func(o *Options) { o.Timeout = 0 }},
		{"Options.Name", true, func(o *Options) { o.Name = "other" }},
		{"Options.Concurrency", true, func(o *Options) { o.Concurrency = nil; o.Adaptive = &resilience.AdaptiveLimiterOptions{} }},
		{"Options.RateLimit", true, func(o *Options) { o.RateLimit = nil }},
		{"Options.RetryAfter", true, func(o *Options) { o.RetryAfter = 5 * time.Second }},
		{"Options.Render", true, func(o *Options) { o.Render = func(_ error, d Response) Response { return d } }},
		{"ConcurrencyLimiterOptions.Priority", true, func(o *Options) { o.Concurrency.Priority = nil }},
		{"ConcurrencyLimiterOptions.Flow", true, func(o *Options) { o.Concurrency.Flow = func(context.Context) string { return "k" } }},
		{"RateLimiterOptions.Algorithm", true, func(o *Options) { o.RateLimit.Algorithm = ratelimit.TokenBucket }},
		{"RateLimiterOptions.Key", true, func(o *Options) { o.RateLimit.Key = func(context.Context) string { return "k" } }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			m := mustNew(t, reconfBase())
			before, beforeStats := m.Stats().Config, m.Stats()
			o := reconfBase()
			tc.change(&o)
			err := m.Reconfigure(o)
			var ce *resilience.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("got %v, want a *ConfigError for %s", err, tc.field)
			}
			if errors.Is(err, resilience.ErrNotLive) != tc.notLive {
				t.Fatalf("%v: matches ErrNotLive %v, want %v", err, !tc.notLive, tc.notLive)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("%q does not name %s", err, tc.field)
			}
			if got := m.Stats().Config; got != before {
				t.Fatalf("settings changed: %+v, was %+v", got, before)
			}
			after := m.Stats()
			if after.Limit != beforeStats.Limit || m.RateLimiter().Policy() != mustNew(t, reconfBase()).RateLimiter().Policy() {
				t.Fatalf("limits changed: %+v, rate %+v", after.LimiterStats, m.RateLimiter().Policy())
			}
			if after.Reconfigured != 0 || after.ReconfigureRefused != 1 {
				t.Fatalf("counted %d applied, %d refused, want one refused", after.Reconfigured, after.ReconfigureRefused)
			}
		})
	}
}

// A valid option set applies every live part at once, and the options
// and settings in force read it back; the functions stay New's.
func TestReconfigureAppliesEveryLivePart(t *testing.T) {
	var ranked atomic.Int64
	base := reconfBase()
	base.Concurrency.Priority = func(context.Context) int { ranked.Add(1); return 0 }
	m := mustNew(t, base)
	o := reconfBase() // its Priority is another closure: New's stays
	o.Timeout = 700 * time.Millisecond
	o.Shadow = Shadow{RateLimit: 10, Concurrency: 20, Timeout: 30}
	o.Concurrency.PermitLimit, o.Concurrency.QueueLimit = 7, 5
	o.Concurrency.QueueTimeout, o.Concurrency.Overflow = 300*time.Millisecond, resilience.OverflowDropOldest
	o.Concurrency.CoDel = &resilience.CoDelOptions{}
	o.RateLimit.PermitLimit, o.RateLimit.Window = 3, time.Minute
	if err := m.Reconfigure(o); err != nil {
		t.Fatal(err)
	}
	want := Settings{TimeoutMS: 700, PermitLimit: 7, QueueLimit: 5, QueueTimeoutMS: 300, Overflow: "drop-oldest", CoDel: true,
		RateLimit: 3, RateWindowMS: 60000, ShadowRateLimit: 10, ShadowConcurrency: 20, ShadowTimeout: 30}
	if got := m.Stats().Config; got != want {
		t.Fatalf("settings %+v, want %+v", got, want)
	}
	if s := m.Stats(); s.Limit != 7 || s.Reconfigured != 1 || s.ReconfigureRefused != 0 {
		t.Fatalf("stats %+v", s)
	}
	if p := m.RateLimiter().Policy(); p.Limit != 3 || p.Window != time.Minute {
		t.Fatalf("rate policy %+v", p)
	}
	if m.tconf.Load().d != 700*time.Millisecond || m.tconf.Load().err.Timeout != 700*time.Millisecond {
		t.Fatalf("timeout %+v", m.tconf.Load())
	}
	m.Options().Concurrency.Priority(context.Background())
	if ranked.Load() != 1 {
		t.Fatal("Options() does not hold New's Priority")
	}
}

// The rate limit's new permit limit counts from the next take.
func TestReconfigureRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Minute}}
		m := mustNew(t, o)
		h := m.Handler(trivial)
		get := func() int {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			return w.Code
		}
		if a, b := get(), get(); a != 200 || b != 429 {
			t.Fatalf("limit 1: %d %d", a, b)
		}
		o.RateLimit = &resilience.RateLimiterOptions{PermitLimit: 3, Window: time.Minute}
		if err := m.Reconfigure(o); err != nil {
			t.Fatal(err)
		}
		if a, b, c := get(), get(), get(); a != 200 || b != 200 || c != 429 {
			t.Fatalf("limit 3 with one taken: %d %d %d", a, b, c)
		}
	})
}

// A new timeout times the requests that arrive after it; a running one
// keeps its deadline.
func TestReconfigureTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := Options{Timeout: 4 * time.Second}
		m := mustNew(t, o)
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}))
		start := time.Now()
		old := newSyncRecorder()
		oldDone := serveAsync(h, old, httptest.NewRequest("GET", "/", nil))
		synctest.Wait()
		o.Timeout = time.Second
		if err := m.Reconfigure(o); err != nil {
			t.Fatal(err)
		}
		fresh := newSyncRecorder()
		<-serveAsync(h, fresh, httptest.NewRequest("GET", "/", nil))
		if code, _, _ := fresh.result(); code != http.StatusGatewayTimeout || time.Since(start) != time.Second {
			t.Fatalf("new request: %d after %v, want 504 after 1s", code, time.Since(start))
		}
		<-oldDone
		if code, _, _ := old.result(); code != http.StatusGatewayTimeout || time.Since(start) != 4*time.Second {
			t.Fatalf("running request: %d after %v, want 504 after its 4s", code, time.Since(start))
		}
	})
}

// A smaller permit limit lets the running finish and admits again only
// below it; a smaller queue refuses its excess at once with 503 dropped,
// counted; a larger limit grants the queue at once.
func TestReconfigureShrinkAndGrow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 2, QueueLimit: 3}}
		m := mustNew(t, o)
		release := make(chan struct{})
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
		var recs []*syncRecorder
		var dones []<-chan struct{}
		for range 5 { // 2 run, 3 queue
			w := newSyncRecorder()
			recs = append(recs, w)
			dones = append(dones, serveAsync(h, w, httptest.NewRequest("GET", "/", nil)))
			synctest.Wait()
		}
		o.Concurrency = &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1}
		if err := m.Reconfigure(o); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		s := m.Stats()
		if s.InFlight != 2 || s.Queued != 1 || s.Limit != 1 || s.Dropped != 2 {
			t.Fatalf("after the shrink: %+v", s)
		}
		for i, w := range recs[3:] { // the newest two were evicted
			<-dones[3+i]
			if code, _, body := w.result(); code != http.StatusServiceUnavailable || !strings.Contains(body, `"reason":"dropped"`) {
				t.Fatalf("evicted: %d %s", code, body)
			}
		}
		o.Concurrency = &resilience.ConcurrencyLimiterOptions{PermitLimit: 3, QueueLimit: 1}
		if err := m.Reconfigure(o); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s := m.Stats(); s.InFlight != 3 || s.Queued != 0 {
			t.Fatalf("after the raise: %+v", s)
		}
		close(release)
		for _, d := range dones[:3] {
			<-d
		}
		s = m.Stats()
		if s.InFlight != 0 || s.Queued != 0 || s.Admitted != 3 || s.Dropped != 2 || s.Requests != 5 {
			t.Fatalf("at the end: %+v", s)
		}
	})
}

// The adaptive limiter's live limit moves into new bounds at once, and
// Stats.Config reports the bounds in force, defaults applied.
func TestReconfigureAdaptiveBounds(t *testing.T) {
	o := Options{Adaptive: &resilience.AdaptiveLimiterOptions{InitialLimit: 20, QueueLimit: 2}}
	m := mustNew(t, o)
	if c := m.Stats().Config; c.MinLimit != 1 || c.MaxLimit != 1000 {
		t.Fatalf("config bounds %d..%d, want the defaults in force, 1..1000", c.MinLimit, c.MaxLimit)
	}
	o.Adaptive = &resilience.AdaptiveLimiterOptions{MinLimit: 2, MaxLimit: 8, QueueLimit: 4}
	if err := m.Reconfigure(o); err != nil {
		t.Fatal(err)
	}
	if s := m.Stats(); s.Limit != 8 || s.Config.MinLimit != 2 || s.Config.MaxLimit != 8 {
		t.Fatalf("limit %d, bounds %d..%d, want the new ceiling 8 within 2..8", s.Limit, s.Config.MinLimit, s.Config.MaxLimit)
	}
	o.Adaptive = &resilience.AdaptiveLimiterOptions{MinLimit: 12, MaxLimit: 30}
	if err := m.Reconfigure(o); err != nil {
		t.Fatal(err)
	}
	if s := m.Stats(); s.Limit != 12 {
		t.Fatalf("limit %d, want the new floor 12", s.Limit)
	}
	o.Adaptive = &resilience.AdaptiveLimiterOptions{MinLimit: 40, MaxLimit: 30}
	var ce *resilience.ConfigError
	if err := m.Reconfigure(o); !errors.As(err, &ce) || ce.Field != "AdaptiveLimiterOptions.MinLimit" {
		t.Fatalf("min over max: %v", err)
	}
	if s := m.Stats(); s.Limit != 12 {
		t.Fatalf("limit %d after a refused change, want 12", s.Limit)
	}
}

// Under concurrent traffic and reconfiguration (permit limit, queue
// size, timeout, shadow share), in a synctest bubble, with rapid drawing
// the sequence: every request is answered exactly once; the counts add
// up to every request; a request admitted with a permit found in flight
// no more than the limit in force when it was admitted (so, at most the
// largest limit ever in force); and once every request is done no permit
// or queue place is left.
func TestReconfigureUnderTrafficRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		synctest.Test(t, func(t *testing.T) { reconfigureTraffic(rt) })
	})
}

func reconfigureTraffic(rt *rapid.T) {
	limit := rapid.IntRange(1, 4).Draw(rt, "limit")
	o := Options{
		Timeout:     time.Duration(rapid.IntRange(1, 5).Draw(rt, "timeout")) * time.Second,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: limit, QueueLimit: rapid.IntRange(0, 4).Draw(rt, "queue")},
	}
	m, err := New(o)
	if err != nil {
		rt.Fatal(err)
	}
	maxLimit := limit
	var (
		mu        sync.Mutex
		overLimit bool
	)
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := m.Stats()
		mu.Lock()
		if s.InFlight > maxLimit {
			overLimit = true
		}
		mu.Unlock()
		d, _ := time.ParseDuration(r.Header.Get("X-Work"))
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
		w.Write([]byte("ok"))
	}))
	n := rapid.IntRange(1, 30).Draw(rt, "requests")
	recs := make([]*countingRecorder, n)
	var wg sync.WaitGroup
	for i := range n {
		recs[i] = &countingRecorder{header: http.Header{}}
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-Work", (time.Duration(rapid.IntRange(0, 3000).Draw(rt, "work")) * time.Millisecond).String())
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.ServeHTTP(recs[i], req)
		}()
		if rapid.Bool().Draw(rt, "pause") {
			time.Sleep(time.Duration(rapid.IntRange(1, 500).Draw(rt, "gap")) * time.Millisecond)
		}
		if rapid.IntRange(0, 3).Draw(rt, "reconfigure?") == 0 {
			next := o
			c := *o.Concurrency
			c.PermitLimit = rapid.IntRange(1, 5).Draw(rt, "newLimit")
			c.QueueLimit = rapid.IntRange(0, 5).Draw(rt, "newQueue")
			next.Concurrency = &c
			next.Timeout = time.Duration(rapid.IntRange(1, 5).Draw(rt, "newTimeout")) * time.Second
			next.Shadow.Concurrency = rapid.SampledFrom([]int{0, 0, 50, 100}).Draw(rt, "shadow")
			mu.Lock()
			maxLimit = max(maxLimit, c.PermitLimit)
			mu.Unlock()
			if err := m.Reconfigure(next); err != nil {
				rt.Fatal(err)
			}
			o = next
			synctest.Wait()
			if s := m.Stats(); s.Queued > c.QueueLimit {
				rt.Fatalf("%d queued after a shrink to %d", s.Queued, c.QueueLimit)
			}
		}
	}
	wg.Wait()
	synctest.Wait() // late handlers return too
	for i, r := range recs {
		if r.writes.Load() != 1 {
			rt.Fatalf("request %d answered %d times (status %d)", i, r.writes.Load(), r.code)
		}
	}
	s := m.Stats()
	if s.InFlight != 0 || s.Queued != 0 || s.Late != 0 || s.Shadow.Over != 0 {
		rt.Fatalf("left behind: %+v", s)
	}
	if s.Requests != uint64(n) {
		rt.Fatalf("counted %d requests of %d: %+v", s.Requests, n, s.RequestCounts)
	}
	if overLimit {
		rt.Fatal("a handler ran with more in flight than any limit in force")
	}
}

// countingRecorder counts the responses a request got (WriteHeader
// calls, the implicit one of a first Write included).
type countingRecorder struct {
	mu     sync.Mutex
	header http.Header
	code   int
	writes atomic.Int32
}

func (c *countingRecorder) Header() http.Header { return c.header }
func (c *countingRecorder) WriteHeader(code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.code == 0 {
		c.code = code
		c.writes.Add(1)
	} else {
		c.writes.Add(1) // a second answer
	}
}
func (c *countingRecorder) Write(p []byte) (int, error) {
	c.mu.Lock()
	first := c.code == 0
	c.mu.Unlock()
	if first {
		c.WriteHeader(http.StatusOK)
	}
	return len(p), nil
}

// Options returns copies of the stages' options: changing them changes
// nothing until they are passed to Reconfigure, which is how one part
// changes (a shadow ramp, say), and Stats.Config follows.
func TestOptionsReturnsACopyToChangeAndReconfigure(t *testing.T) {
	m := mustNew(t, reconfBase())
	o := m.Options()
	o.Concurrency.PermitLimit = 99
	o.RateLimit.PermitLimit = 99
	o.Shadow.Concurrency = 40
	if c := m.Stats().Config; c.PermitLimit == 99 || c.RateLimit == 99 || c.ShadowConcurrency != 0 || m.Options().Concurrency.PermitLimit == 99 {
		t.Fatalf("changing what Options returned changed the middleware: %+v", c)
	}
	if err := m.Reconfigure(o); err != nil {
		t.Fatal(err)
	}
	if c := m.Stats().Config; c.PermitLimit != 99 || c.RateLimit != 99 || c.ShadowConcurrency != 40 {
		t.Fatalf("after Reconfigure: %+v", c)
	}
	o = m.Options()
	o.Shadow = Shadow{Timeout: 10}
	if err := m.Reconfigure(o); err != nil {
		t.Fatal(err)
	}
	if c := m.Stats().Config; c.ShadowConcurrency != 0 || c.ShadowTimeout != 10 || c.PermitLimit != 99 {
		t.Fatalf("after the second Reconfigure: %+v", c)
	}
}

// The structured RateLimit-Policy field advertises the policy in force.
func TestReconfigureRateLimitPolicyHeader(t *testing.T) {
	o := Options{RateLimitHeaders: RateLimitHeadersStructured, RateLimit: &resilience.RateLimiterOptions{PermitLimit: 5, Window: time.Minute}}
	m := mustNew(t, o)
	policy := func() string {
		w := httptest.NewRecorder()
		m.Handler(trivial).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		return w.Header().Get("RateLimit-Policy")
	}
	if got := policy(); got != `"default";q=5;w=60` {
		t.Fatalf("before: %q", got)
	}
	o.RateLimit = &resilience.RateLimiterOptions{PermitLimit: 50, Window: time.Second}
	if err := m.Reconfigure(o); err != nil {
		t.Fatal(err)
	}
	if got := policy(); got != `"default";q=50;w=1` {
		t.Fatalf("after: %q", got)
	}
}

// A refusal of a value that cannot change live says what it was and what
// was asked, so the log line alone tells the operator which change to
// undo (a default shows as its zero value).
func TestReconfigureNotLiveNamesBothValues(t *testing.T) {
	for _, tc := range []struct {
		change func(o *Options)
		want   string
	}{
		{func(o *Options) { o.Name = "other" }, `Options.Name cannot change while in use: labels the middleware's telemetry: was "" at New, got "other"`},
		{func(o *Options) { o.Timeout = 0 }, "Options.Timeout cannot change while in use: its value can change live, but not to 0 (no timeout)"},
		{func(o *Options) { o.RetryAfter = 5 * time.Second }, "Options.RetryAfter cannot change while in use: was 0s at New, got 5s"},
		{func(o *Options) { o.TimeoutFrom = TimeoutFromAdmission }, `Options.TimeoutFrom cannot change while in use: was "arrival" at New, got "admission"`},
		{func(o *Options) { o.AnswerPanics = true }, "Options.AnswerPanics cannot change while in use: was false at New, got true"},
		{func(o *Options) { o.Concurrency.Name = "db" }, `ConcurrencyLimiterOptions.Name cannot change while in use: the limiter was built named "", got "db"`},
		{func(o *Options) { o.RateLimit.Name = "api" }, `RateLimiterOptions.Name cannot change while in use: names the policy in the store: the limiter was built named "", got "api"`},
		{func(o *Options) { o.RateLimit.FailClosed = true }, "RateLimiterOptions.FailClosed cannot change while in use: was false when the limiter was built, got true"},
	} {
		m := mustNew(t, reconfBase())
		o := m.Options()
		tc.change(&o)
		err := m.Reconfigure(o)
		if !errors.Is(err, resilience.ErrNotLive) || err.Error() != "resilience: "+tc.want {
			t.Errorf("got %v\nwant resilience: %s", err, tc.want)
		}
	}
}

// The Cost functions are New's, as the other functions: Options returns
// them after a Reconfigure that was given others, and the middleware
// still charges by New's.
func TestReconfigureKeepsNewsCostFunctions(t *testing.T) {
	newCost := func(context.Context) int { return 2 }
	o := reconfBase()
	o.Concurrency.Cost = newCost
	o.RateLimit.Cost = newCost
	m := mustNew(t, o)
	next := m.Options()
	other := func(context.Context) int { return 3 }
	next.Concurrency.Cost, next.RateLimit.Cost = other, other
	if err := m.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	got := m.Options()
	if c, r := got.Concurrency.Cost(context.Background()), got.RateLimit.Cost(context.Background()); c != 2 || r != 2 {
		t.Fatalf("Options returns the Cost functions given to Reconfigure (%d, %d), not New's (2)", c, r)
	}
	// The permits a request holds are still New's cost.
	held := make(chan struct{})
	release := make(chan struct{})
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { close(held); <-release }))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}()
	<-held
	if in := m.Stats().InFlight; in != 2 {
		t.Errorf("a request holds %d permits, want New's cost, 2", in)
	}
	close(release)
	<-done
}

// The options in force, passed back unchanged, are accepted and change
// nothing, with every stage and function set.
func TestReconfigureOptionsUnchanged(t *testing.T) {
	o := reconfBase()
	o.Concurrency.CoDel = &resilience.CoDelOptions{}
	o.Concurrency.Flow = func(context.Context) string { return "k" }
	o.Concurrency.Cost = func(context.Context) int { return 1 }
	o.RateLimit.Key = func(context.Context) string { return "k" }
	o.Shadow = Shadow{RateLimit: 100, Concurrency: 50, Timeout: 10}
	o.AnswerPanics = true
	m := mustNew(t, o)
	before := m.Stats().Config
	if err := m.Reconfigure(m.Options()); err != nil {
		t.Fatal(err)
	}
	if got := m.Stats().Config; got != before {
		t.Fatalf("config changed: %+v, was %+v", got, before)
	}
	a := mustNew(t, Options{Adaptive: &resilience.AdaptiveLimiterOptions{}, TimeoutFrom: TimeoutFromAdmission, Timeout: time.Second})
	if err := a.Reconfigure(a.Options()); err != nil {
		t.Fatal(err)
	}
}

// A limit moved by Limiter().SetLimit is the PermitLimit Options
// reports, so a Reconfigure starting from Options (a shadow ramp) keeps
// it and Reconfigure(m.Options()) changes nothing; options built afresh
// set their own limit.
func TestReconfigureFromOptionsKeepsTheLimitSetLimitMoved(t *testing.T) {
	m := mustNew(t, reconfBase())
	m.Limiter().SetLimit(2)
	if got := m.Options().Concurrency.PermitLimit; got != 2 {
		t.Fatalf("Options().Concurrency.PermitLimit = %d after SetLimit(2), want 2", got)
	}
	o := m.Options()
	o.Shadow.Concurrency = 50
	if err := m.Reconfigure(o); err != nil {
		t.Fatal(err)
	}
	if l := m.Stats().Limit; l != 2 {
		t.Fatalf("limit %d after a shadow-only Reconfigure from Options, want SetLimit's 2", l)
	}
	if err := m.Reconfigure(reconfBase()); err != nil {
		t.Fatal(err)
	}
	if l, want := m.Stats().Limit, reconfBase().Concurrency.PermitLimit; l != want {
		t.Fatalf("limit %d after a Reconfigure with fresh options, want their %d", l, want)
	}
}
