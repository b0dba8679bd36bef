package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/go-chi/chi/v5"
	"github.com/labstack/echo/v4"

	resiliencechi "github.com/ylcnfrht/resilience/adapters/chi"
	resilienceecho "github.com/ylcnfrht/resilience/adapters/echo"
	resiliencegin "github.com/ylcnfrht/resilience/adapters/gin"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// A framework adapter's cost is the adapter's router against the same
// router without it, both serving trivial at /work; each adapter's figure
// stands beside chi's adapter over chi, measured in the same run.

// frameworkConfigs are the inbound configurations measured per framework.
var frameworkConfigs = []struct {
	name string
	opts func() inbound.Options
}{
	{"limiter", func() inbound.Options { return inbound.Options{Concurrency: limiterOptions()} }},
	{"limiter+timeout", func() inbound.Options {
		return inbound.Options{Concurrency: limiterOptions(), Timeout: reqTimeout}
	}},
}

// framework builds a router serving trivial at /work, with the adapter
// configured by opts in front, or bare when opts is nil.
type framework struct {
	name  string
	build func(opts *inbound.Options) (http.Handler, error)
}

var frameworks = []framework{
	{"chi", func(opts *inbound.Options) (http.Handler, error) {
		r := chi.NewRouter()
		if opts != nil {
			mw, err := resiliencechi.New(*opts)
			if err != nil {
				return nil, err
			}
			r.Use(mw.Handler)
		}
		r.Get("/work", trivial)
		return r, nil
	}},
	{"gin", func(opts *inbound.Options) (http.Handler, error) {
		gin.SetMode(gin.ReleaseMode)
		r := gin.New()
		if opts != nil {
			mw, err := resiliencegin.New(*opts)
			if err != nil {
				return nil, err
			}
			r.Use(mw.Handler)
		}
		r.GET("/work", gin.WrapH(trivial))
		return r, nil
	}},
	{"echo", func(opts *inbound.Options) (http.Handler, error) {
		e := echo.New()
		if opts != nil {
			mw, err := resilienceecho.New(*opts)
			if err != nil {
				return nil, err
			}
			e.Use(mw.Handler)
		}
		e.GET("/work", echo.WrapHandler(trivial))
		return e, nil
	}},
}

// frameworkContenders lists, per framework, the bare router and then the
// router with the adapter in each configuration.
func frameworkContenders() []contender {
	var cs []contender
	for _, f := range frameworks {
		cs = append(cs, contender{f.name + "/bare", func() (http.Handler, error) { return f.build(nil) }})
		for _, c := range frameworkConfigs {
			cs = append(cs, contender{f.name + "/" + c.name, func() (http.Handler, error) {
				o := c.opts()
				return f.build(&o)
			}})
		}
	}
	return cs
}

// sink is a ResponseWriter that keeps only the status. Reused for every
// request, it allocates nothing, so the framework figures are the
// frameworks' and the adapters' own: a recorder costs more for a handler
// whose Content-Type net/http sniffs (chi's route here) than for one that
// sends its header first (gin's and echo's writers do), and its garbage
// makes every figure noisier.
type sink struct {
	h    http.Header
	code int
}

func (s *sink) Header() http.Header { return s.h }

func (s *sink) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
}

func (s *sink) Write(p []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return len(p), nil
}

// serveSink is serve with a sink for the response.
func serveSink(b *testing.B, h http.Handler) {
	b.Helper()
	req := httptest.NewRequest(http.MethodGet, "/work", nil)
	w := &sink{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		w.code = 0
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("status %d, want 200: the benchmark must not measure rejections", w.code)
		}
	}
}

func BenchmarkFramework(b *testing.B) {
	for _, c := range frameworkContenders() {
		b.Run(c.name, func(b *testing.B) { serveSink(b, mustBuild(b, c)) })
	}
}

// TestFrameworkOverheadTable measures every framework bare and with its
// adapter in interleaved rounds and prints each adapter's overhead over
// its bare framework beside chi's adapter over chi. The overhead is the
// median, over the rounds, of the adapter's time minus its bare
// framework's in the same round (the two are measured one after the
// other, so a round's load hits both), with the interquartile range of
// those differences; allocations are exact. It only runs with -overhead:
//
//	go test -run TestFrameworkOverheadTable -v ./bench/ -overhead
func TestFrameworkOverheadTable(t *testing.T) {
	if !*overhead {
		t.Skip("run with -overhead to measure")
	}
	cs := frameworkContenders()
	index := map[string]int{}
	for i, c := range cs {
		index[c.name] = i
	}
	results := make([][]testing.BenchmarkResult, len(cs))
	for round := range *overheadRounds {
		// Each round starts at a different stack, so none is always the
		// one measured right after another's garbage.
		for k := range cs {
			i := (round + k) % len(cs)
			c := cs[i]
			h, err := c.build()
			if err != nil {
				t.Fatal(err)
			}
			results[i] = append(results[i], testing.Benchmark(func(b *testing.B) { serveSink(b, h) }))
		}
	}
	median := func(rs []testing.BenchmarkResult) testing.BenchmarkResult {
		rs = slices.Clone(rs)
		slices.SortFunc(rs, func(a, b testing.BenchmarkResult) int { return int(a.NsPerOp() - b.NsPerOp()) })
		return rs[len(rs)/2]
	}
	// overhead is the median and the quartiles of name's per-round
	// difference to its framework's bare stack.
	overhead := func(fw, name string) (med, q1, q3 int64) {
		a, bare := results[index[name]], results[index[fw+"/bare"]]
		d := make([]int64, len(a))
		for r := range a {
			d[r] = a[r].NsPerOp() - bare[r].NsPerOp()
		}
		slices.Sort(d)
		return d[len(d)/2], d[len(d)/4], d[(3*len(d))/4]
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-22s %7s %6s %7s %9s %14s %7s %10s\n", "stack", "ns/op", "B/op", "allocs", "overhead", "(IQR)", "+allocs", "÷ chi's")
	for _, f := range frameworks {
		bare := median(results[index[f.name+"/bare"]])
		fmt.Fprintf(&sb, "%-22s %7d %6d %7d\n", f.name+"/bare", bare.NsPerOp(), bare.AllocedBytesPerOp(), bare.AllocsPerOp())
		for _, c := range frameworkConfigs {
			name := f.name + "/" + c.name
			r := median(results[index[name]])
			over, q1, q3 := overhead(f.name, name)
			chiOver, _, _ := overhead("chi", "chi/"+c.name)
			fmt.Fprintf(&sb, "%-22s %7d %6d %7d %9d %14s %7d %10.2f\n", name, r.NsPerOp(), r.AllocedBytesPerOp(), r.AllocsPerOp(),
				over, fmt.Sprintf("(%d..%d)", q1, q3), r.AllocsPerOp()-bare.AllocsPerOp(), float64(over)/float64(chiOver))
		}
	}
	t.Logf("%d interleaved rounds; overhead: median of the per-round differences to the bare framework, ns:\n%s", *overheadRounds, sb.String())
}
