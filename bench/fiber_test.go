package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	resiliencechi "github.com/ylcnfrht/resilience/adapters/chi"
	resiliencefiber "github.com/ylcnfrht/resilience/adapters/fiber"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// The adapters' overhead over their frameworks: a fiber app with and
// without resiliencefiber, beside a chi router with and without
// resiliencechi, for the same configurations, one request at a time.
// Each side's bare framework is its own baseline, so what is compared is
// what each adapter adds.

// adapterConfigs are the configurations both adapters are measured with.
var adapterConfigs = []struct {
	name string
	opts func() inbound.Options
}{
	{"limiter", func() inbound.Options { return inbound.Options{Concurrency: limiterOptions()} }},
	{"limiter-priority", func() inbound.Options {
		c := limiterOptions()
		c.Priority = func(context.Context) int { return 0 }
		return inbound.Options{Concurrency: c}
	}},
	{"limiter-timeout", func() inbound.Options { return inbound.Options{Concurrency: limiterOptions(), Timeout: reqTimeout} }},
}

// runner serves one request per call and reports whether it got 200 "ok".
type runner func() bool

// chiRunner is a chi router, with the adapter in front of its route when
// opts is not nil. Each call serves the same request into the same
// writer, reset, as fiberRunner reuses its RequestCtx: neither side's
// figure carries a recorder's allocations (httptest.NewRecorder's would
// be most of chi's, and their garbage the noise of its overhead).
func chiRunner(opts *inbound.Options) (runner, error) {
	r := chi.NewRouter()
	if opts != nil {
		mw, err := resiliencechi.New(*opts)
		if err != nil {
			return nil, err
		}
		r.Use(mw.Handler)
	}
	r.Get("/users/{id}", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(okBody) })
	req := httptest.NewRequest(http.MethodGet, "/users/7", nil)
	w := &reusedWriter{h: http.Header{}}
	return func() bool {
		w.reset()
		r.ServeHTTP(w, req)
		return w.code == http.StatusOK && string(w.body) == "ok"
	}, nil
}

// reusedWriter is a ResponseWriter kept across requests: it records the
// status and the body, and allocates nothing once its buffers have grown.
type reusedWriter struct {
	h    http.Header
	code int
	body []byte
}

func (w *reusedWriter) reset() {
	clear(w.h)
	w.code, w.body = 0, w.body[:0]
}

func (w *reusedWriter) Header() http.Header { return w.h }

func (w *reusedWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *reusedWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.body = append(w.body, p...)
	return len(p), nil
}

// fiberRunner is a fiber app's fasthttp handler, with the adapter in front
// of its route when opts is not nil, and wrapped by OnTimeHandler when
// onTime is set. Each call serves the same RequestCtx, reset as fasthttp
// resets it between requests on a connection.
func fiberRunner(opts *inbound.Options, onTime bool) (runner, error) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	ok := func(c *fiber.Ctx) error { return c.Send(okBody) }
	if opts != nil {
		mw, err := resiliencefiber.New(*opts)
		if err != nil {
			return nil, err
		}
		app.Get("/users/:id", mw.Handler, ok)
	} else {
		app.Get("/users/:id", ok)
	}
	h := app.Handler()
	if onTime {
		h = resiliencefiber.OnTimeHandler(h)
	}
	var req fasthttp.Request
	req.Header.SetMethod(http.MethodGet)
	req.SetRequestURI("/users/7")
	rc := new(fasthttp.RequestCtx)
	rc.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	return func() bool {
		rc.Response.Reset()
		rc.ResetUserValues()
		h(rc)
		return rc.Response.StatusCode() == http.StatusOK && string(rc.Response.Body()) == "ok"
	}, nil
}

// adapterContender is one measured stack and the baseline it is compared
// with.
type adapterContender struct {
	name, base string
	build      func() (runner, error)
}

func adapterContenders() []adapterContender {
	cs := []adapterContender{
		{"chi", "chi", func() (runner, error) { return chiRunner(nil) }},
		{"fiber", "fiber", func() (runner, error) { return fiberRunner(nil, false) }},
		{"fiber+OnTimeHandler", "fiber", func() (runner, error) { return fiberRunner(nil, true) }},
	}
	for _, c := range adapterConfigs {
		opts := c.opts()
		cs = append(cs,
			adapterContender{"chi+adapter " + c.name, "chi", func() (runner, error) { return chiRunner(&opts) }},
			adapterContender{"fiber+adapter " + c.name, "fiber", func() (runner, error) { return fiberRunner(&opts, false) }},
		)
	}
	opts := adapterConfigs[2].opts()
	cs = append(cs, adapterContender{"fiber+adapter limiter-timeout+OnTimeHandler", "fiber", func() (runner, error) { return fiberRunner(&opts, true) }})
	return cs
}

func runBench(b *testing.B, r runner) {
	b.ReportAllocs()
	for b.Loop() {
		if !r() {
			b.Fatal("not 200 ok: the benchmark must not measure rejections")
		}
	}
}

// BenchmarkAdapterOverhead runs every stack once; TestAdapterOverheadTable
// is the interleaved comparison.
func BenchmarkAdapterOverhead(b *testing.B) {
	for _, c := range adapterContenders() {
		r, err := c.build()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strings.ReplaceAll(c.name, " ", "_"), func(b *testing.B) { runBench(b, r) })
	}
}

// TestAdapterContendersAdmit: every stack answers 200 "ok", so the figures
// are the cost of admitting a request.
func TestAdapterContendersAdmit(t *testing.T) {
	for _, c := range adapterContenders() {
		r, err := c.build()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for range 3 {
			if !r() {
				t.Fatalf("%s: not 200 ok", c.name)
			}
		}
	}
}

// TestAdapterOverheadTable measures every stack with the adapter right
// beside its bare framework, in pairs, for several rounds (each round
// starting at another pair, and alternating which of the two goes first),
// and prints for each the median of the pairs' differences: on a shared
// machine, load that drifts between two distant measurements would
// otherwise be most of a difference of a hundred nanoseconds. It only
// runs with -overhead:
//
//	go test -run TestAdapterOverheadTable -v ./bench/ -overhead
func TestAdapterOverheadTable(t *testing.T) {
	if !*overhead {
		t.Skip("run with -overhead to measure")
	}
	cs := adapterContenders()
	byName := map[string]adapterContender{}
	var pairs []adapterContender
	for _, c := range cs {
		byName[c.name] = c
		if c.name != c.base {
			pairs = append(pairs, c)
		}
	}
	measure := func(c adapterContender) testing.BenchmarkResult {
		r, err := c.build()
		if err != nil {
			t.Fatal(err)
		}
		return testing.Benchmark(func(b *testing.B) { runBench(b, r) })
	}
	type pair struct{ stack, base testing.BenchmarkResult }
	results := make([][]pair, len(pairs))
	for round := range *overheadRounds {
		for k := range pairs {
			i := (round + k) % len(pairs)
			var p pair
			if (round+k)%2 == 0 {
				p.base = measure(byName[pairs[i].base])
				p.stack = measure(pairs[i])
			} else {
				p.stack = measure(pairs[i])
				p.base = measure(byName[pairs[i].base])
			}
			results[i] = append(results[i], p)
		}
	}
	median := func(xs []int64) int64 {
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	type row struct {
		ns, base, over int64
		r, b           testing.BenchmarkResult
	}
	rows := map[string]row{}
	for i, ps := range results {
		var ns, base, over []int64
		for _, p := range ps {
			ns = append(ns, p.stack.NsPerOp())
			base = append(base, p.base.NsPerOp())
			over = append(over, p.stack.NsPerOp()-p.base.NsPerOp())
		}
		rows[pairs[i].name] = row{median(ns), median(base), median(over), ps[0].stack, ps[0].base}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-46s %8s %8s %7s %7s %12s %8s %12s\n", "stack", "ns/op", "bare ns", "B/op", "allocs", "overhead ns", "+allocs", "÷ chi's ns")
	for _, c := range pairs {
		w := rows[c.name]
		ratio := ""
		// A fiber stack with the adapter, beside chi's adapter in the
		// same configuration (OnTimeHandler's stacks included).
		if cfg, ok := strings.CutPrefix(c.name, "fiber+adapter "); ok {
			cfg, _, _ = strings.Cut(cfg, "+")
			if chi, ok := rows["chi+adapter "+cfg]; ok {
				ratio = fmt.Sprintf("%.2f", float64(w.over)/float64(chi.over))
			}
		}
		fmt.Fprintf(&sb, "%-46s %8d %8d %7d %7d %12d %8d %12s\n", c.name, w.ns, w.base, w.r.AllocedBytesPerOp(), w.r.AllocsPerOp(),
			w.over, w.r.AllocsPerOp()-w.b.AllocsPerOp(), ratio)
	}
	t.Logf("median of %d rounds of adjacent pairs (%s):\n%s", *overheadRounds, time.Now().UTC().Format(time.RFC3339), sb.String())
}
