package bench

import (
	"fmt"
	"net/http"
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

func BenchmarkFramework(b *testing.B) {
	for _, c := range frameworkContenders() {
		b.Run(c.name, func(b *testing.B) { serve(b, mustBuild(b, c)) })
	}
}

// TestFrameworkOverheadTable measures every framework bare and with its
// adapter in interleaved rounds and prints each adapter's overhead over
// its bare framework (median ns, exact allocs) beside chi's. It only runs
// with -overhead:
//
//	go test -run TestFrameworkOverheadTable -v ./bench/ -overhead
func TestFrameworkOverheadTable(t *testing.T) {
	if !*overhead {
		t.Skip("run with -overhead to measure")
	}
	cs := frameworkContenders()
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
			results[i] = append(results[i], testing.Benchmark(func(b *testing.B) { serve(b, h) }))
		}
	}
	med := map[string]testing.BenchmarkResult{}
	for i, rs := range results {
		slices.SortFunc(rs, func(a, b testing.BenchmarkResult) int { return int(a.NsPerOp() - b.NsPerOp()) })
		med[cs[i].name] = rs[len(rs)/2]
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-24s %9s %8s %10s %12s %12s %14s\n", "stack", "ns/op", "B/op", "allocs/op", "overhead ns", "+allocs", "÷ chi's ns")
	for _, f := range frameworks {
		bare := med[f.name+"/bare"]
		fmt.Fprintf(&sb, "%-24s %9d %8d %10d\n", f.name+"/bare", bare.NsPerOp(), bare.AllocedBytesPerOp(), bare.AllocsPerOp())
		for _, c := range frameworkConfigs {
			r := med[f.name+"/"+c.name]
			over := r.NsPerOp() - bare.NsPerOp()
			chiOver := med["chi/"+c.name].NsPerOp() - med["chi/bare"].NsPerOp()
			fmt.Fprintf(&sb, "%-24s %9d %8d %10d %12d %12d %14.2f\n", f.name+"/"+c.name, r.NsPerOp(),
				r.AllocedBytesPerOp(), r.AllocsPerOp(), over, r.AllocsPerOp()-bare.AllocsPerOp(), float64(over)/float64(chiOver))
		}
	}
	t.Logf("median of %d interleaved rounds:\n%s", *overheadRounds, sb.String())
}
