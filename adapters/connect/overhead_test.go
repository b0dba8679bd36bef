package resilienceconnect_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

var (
	overhead       = flag.Bool("overhead", false, "run TestOverheadTable: the adapter's per-call overhead over bare connect, contenders interleaved")
	overheadRounds = flag.Int("overhead.rounds", 5, "rounds of TestOverheadTable; each contender's median is reported")
)

// contender is one handler measured per call; base names the bare handler
// its overhead is measured against. A contender with a caller deadline
// sends Connect-Timeout-Ms, so connect alone sets a deadline too.
type contender struct {
	name, base     string
	build          func() (http.Handler, error)
	callerDeadline bool
}

func limiterOptions() inbound.Options {
	return inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1 << 20}}
}

func timeoutOptions() inbound.Options {
	o := limiterOptions()
	o.Timeout = 5 * time.Second
	return o
}

func priorityOptions() inbound.Options {
	o := limiterOptions()
	o.Concurrency.Priority = func(context.Context) int { return 0 }
	return o
}

func sayHandler() http.Handler {
	return connect.NewUnaryHandler(sayProcedure, func(_ context.Context, req *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
		return connect.NewResponse(wrapperspb.String("hello " + req.Msg.GetValue())), nil
	})
}

func bare() (http.Handler, error) { return sayHandler(), nil }

func withAdapter(opts func() inbound.Options) func() (http.Handler, error) {
	return func() (http.Handler, error) {
		mw, err := resilienceconnect.New(opts())
		if err != nil {
			return nil, err
		}
		return mw.Handler(sayHandler()), nil
	}
}

var contenders = []contender{
	{name: "Bare", build: bare},
	{name: "Limiter", base: "Bare", build: withAdapter(limiterOptions)},
	{name: "LimiterPriority", base: "Bare", build: withAdapter(priorityOptions)},
	{name: "LimiterTimeout", base: "Bare", build: withAdapter(timeoutOptions)},
	{name: "BareCallerDeadline", build: bare, callerDeadline: true},
	{name: "LimiterCallerDeadline", base: "BareCallerDeadline", build: withAdapter(limiterOptions), callerDeadline: true},
}

var sayBody, _ = proto.Marshal(wrapperspb.String("x"))

// serve makes Connect unary calls (POST, application/proto) to h through
// an in-memory recorder.
func serve(b *testing.B, h http.Handler, callerDeadline bool) {
	b.Helper()
	b.ReportAllocs()
	body := bytes.NewReader(nil)
	for b.Loop() {
		body.Reset(sayBody)
		req := httptest.NewRequest(http.MethodPost, sayProcedure, body)
		req.Header.Set("Content-Type", "application/proto")
		if callerDeadline {
			req.Header.Set("Connect-Timeout-Ms", "5000")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d, want 200: the benchmark must not measure rejections", rec.Code)
		}
	}
}

func benchmark(b *testing.B, name string) {
	for _, c := range contenders {
		if c.name == name {
			h, err := c.build()
			if err != nil {
				b.Fatal(err)
			}
			serve(b, h, c.callerDeadline)
			return
		}
	}
	b.Fatalf("no contender %s", name)
}

func BenchmarkConnectBare(b *testing.B)                  { benchmark(b, "Bare") }
func BenchmarkConnectLimiter(b *testing.B)               { benchmark(b, "Limiter") }
func BenchmarkConnectLimiterPriority(b *testing.B)       { benchmark(b, "LimiterPriority") }
func BenchmarkConnectLimiterTimeout(b *testing.B)        { benchmark(b, "LimiterTimeout") }
func BenchmarkConnectBareCallerDeadline(b *testing.B)    { benchmark(b, "BareCallerDeadline") }
func BenchmarkConnectLimiterCallerDeadline(b *testing.B) { benchmark(b, "LimiterCallerDeadline") }

// TestOverheadTable measures every contender in interleaved rounds, so a
// burst of noise on a shared machine hits them all alike, and prints each
// one's median with its overhead over bare connect: wall time,
// and the process's CPU time per call (user + system, every goroutine
// included), which a loaded machine distorts less. Allocations are exact:
// testing.Benchmark counts them over every call. It runs only with
// -overhead:
//
//	go test -run TestOverheadTable -v ./adapters/connect/ -overhead
func TestOverheadTable(t *testing.T) {
	if !*overhead {
		t.Skip("run with -overhead to measure")
	}
	results := make([][]testing.BenchmarkResult, len(contenders))
	cpu := make([][]float64, len(contenders)) // process CPU ns per call
	for range *overheadRounds {
		for i, c := range contenders {
			h, err := c.build()
			if err != nil {
				t.Fatal(err)
			}
			var calls int
			before := processCPU()
			results[i] = append(results[i], testing.Benchmark(func(b *testing.B) { serve(b, h, c.callerDeadline); calls += b.N }))
			cpu[i] = append(cpu[i], float64(processCPU()-before)/float64(calls))
		}
	}
	med := map[string]testing.BenchmarkResult{}
	medCPU := map[string]float64{}
	for i, rs := range results {
		slices.SortFunc(rs, func(a, b testing.BenchmarkResult) int { return int(a.NsPerOp() - b.NsPerOp()) })
		med[contenders[i].name] = rs[len(rs)/2]
		slices.Sort(cpu[i])
		medCPU[contenders[i].name] = cpu[i][len(cpu[i])/2]
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-24s %9s %9s %8s %10s %12s %12s %10s %12s\n", "contender", "ns/op", "cpu ns/op", "B/op", "allocs/op",
		"overhead ns", "overhead cpu", "+B/op", "+allocs/op")
	for _, c := range contenders {
		m, mc := med[c.name], medCPU[c.name]
		base, bc := m, mc
		if c.base != "" {
			base, bc = med[c.base], medCPU[c.base]
		}
		fmt.Fprintf(&sb, "%-24s %9d %9.0f %8d %10d %12d %12.0f %10d %12d\n", c.name, m.NsPerOp(), mc, m.AllocedBytesPerOp(), m.AllocsPerOp(),
			m.NsPerOp()-base.NsPerOp(), mc-bc, m.AllocedBytesPerOp()-base.AllocedBytesPerOp(), m.AllocsPerOp()-base.AllocsPerOp())
	}
	t.Logf("median of %d interleaved rounds:\n%s", *overheadRounds, sb.String())
}

// processCPU is the process's CPU time so far (user + system), in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
