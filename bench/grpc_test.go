package bench

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/failsafegrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/test/bufconn"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// The grpc-go contenders: one unary call per op from a grpc-go client to a
// grpc-go server over an in-memory bufconn listener, so the overhead is
// the adapter's (or failsafe-go's) next to the whole of grpc-go's call.

type grpcService struct {
	testpb.UnimplementedTestServiceServer
}

func (grpcService) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

// grpcContender is one way of serving the test service.
type grpcContender struct {
	name, base string
	// setup returns the server options and the registrar the service is
	// registered through.
	setup func(s func(opts ...grpc.ServerOption) *grpc.Server) (*grpc.Server, grpc.ServiceRegistrar, error)
	// callerDeadline: the client sends a grpc-timeout.
	callerDeadline bool
}

func bareGRPC(newServer func(...grpc.ServerOption) *grpc.Server) (*grpc.Server, grpc.ServiceRegistrar, error) {
	s := newServer()
	return s, s, nil
}

func grpcLimiterOptions() inbound.Options {
	return inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1 << 20}}
}

func grpcTimeoutOptions() inbound.Options {
	o := grpcLimiterOptions()
	o.Timeout = 5 * time.Second
	return o
}

func grpcRegistrar(opts func() inbound.Options) func(func(...grpc.ServerOption) *grpc.Server) (*grpc.Server, grpc.ServiceRegistrar, error) {
	return func(newServer func(...grpc.ServerOption) *grpc.Server) (*grpc.Server, grpc.ServiceRegistrar, error) {
		mw, err := resiliencegrpc.New(opts())
		if err != nil {
			return nil, nil, err
		}
		s := newServer()
		return s, mw.Registrar(s), nil
	}
}

func grpcInterceptor(opts func() inbound.Options) func(func(...grpc.ServerOption) *grpc.Server) (*grpc.Server, grpc.ServiceRegistrar, error) {
	return func(newServer func(...grpc.ServerOption) *grpc.Server) (*grpc.Server, grpc.ServiceRegistrar, error) {
		mw, err := resiliencegrpc.New(opts())
		if err != nil {
			return nil, nil, err
		}
		s := newServer(grpc.ChainUnaryInterceptor(mw.UnaryInterceptor()))
		return s, s, nil
	}
}

// failsafeBulkhead is failsafe-go's gRPC server interceptor with a
// bulkhead of the same size: the comparable policy.
func failsafeBulkhead(newServer func(...grpc.ServerOption) *grpc.Server) (*grpc.Server, grpc.ServiceRegistrar, error) {
	bh := bulkhead.New[any](1 << 20)
	s := newServer(grpc.ChainUnaryInterceptor(failsafegrpc.NewUnaryServerInterceptor[any](bh)))
	return s, s, nil
}

var grpcContenders = []grpcContender{
	{name: "GRPCBare", setup: bareGRPC},
	{name: "GRPCLimiter", base: "GRPCBare", setup: grpcRegistrar(grpcLimiterOptions)},
	{name: "GRPCLimiterInterceptor", base: "GRPCBare", setup: grpcInterceptor(grpcLimiterOptions)},
	{name: "FailsafeGRPCBulkhead", base: "GRPCBare", setup: failsafeBulkhead},
	{name: "GRPCLimiterTimeout", base: "GRPCBare", setup: grpcRegistrar(grpcTimeoutOptions)},
	{name: "GRPCBareCallerDeadline", setup: bareGRPC, callerDeadline: true},
	{name: "GRPCLimiterCallerDeadline", base: "GRPCBareCallerDeadline", setup: grpcRegistrar(grpcLimiterOptions), callerDeadline: true},
	{name: "GRPCLimiterTimeoutCallerDeadline", base: "GRPCBareCallerDeadline", setup: grpcRegistrar(grpcTimeoutOptions), callerDeadline: true},
}

// grpcEnv is a running server and its client.
type grpcEnv struct {
	client testpb.TestServiceClient
	close  func()
}

func (c grpcContender) start() (*grpcEnv, error) {
	ln := bufconn.Listen(1 << 20)
	s, reg, err := c.setup(grpc.NewServer)
	if err != nil {
		return nil, err
	}
	testpb.RegisterTestServiceServer(reg, grpcService{})
	go func() { _ = s.Serve(ln) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		s.Stop()
		return nil, err
	}
	return &grpcEnv{client: testpb.NewTestServiceClient(conn), close: func() { _ = conn.Close(); s.Stop() }}, nil
}

func (e *grpcEnv) run(b *testing.B, callerDeadline bool) {
	b.Helper()
	b.ReportAllocs()
	ctx := context.Background()
	if callerDeadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Hour)
		defer cancel()
	}
	req := &testpb.Empty{}
	for b.Loop() {
		if _, err := e.client.EmptyCall(ctx, req); err != nil {
			b.Fatalf("call: %v: the benchmark must not measure rejections", err)
		}
	}
}

func benchmarkGRPC(b *testing.B, name string) {
	for _, c := range grpcContenders {
		if c.name == name {
			e, err := c.start()
			if err != nil {
				b.Fatal(err)
			}
			defer e.close()
			e.run(b, c.callerDeadline)
			return
		}
	}
	b.Fatalf("no contender %s", name)
}

func BenchmarkGRPCBare(b *testing.B)                  { benchmarkGRPC(b, "GRPCBare") }
func BenchmarkGRPCLimiter(b *testing.B)               { benchmarkGRPC(b, "GRPCLimiter") }
func BenchmarkGRPCLimiterInterceptor(b *testing.B)    { benchmarkGRPC(b, "GRPCLimiterInterceptor") }
func BenchmarkFailsafeGRPCBulkhead(b *testing.B)      { benchmarkGRPC(b, "FailsafeGRPCBulkhead") }
func BenchmarkGRPCLimiterTimeout(b *testing.B)        { benchmarkGRPC(b, "GRPCLimiterTimeout") }
func BenchmarkGRPCLimiterCallerDeadline(b *testing.B) { benchmarkGRPC(b, "GRPCLimiterCallerDeadline") }

// TestGRPCOverheadTable measures every grpc-go contender in interleaved
// rounds and prints each one's median, its overhead over bare grpc-go
// (wall and process CPU per call) and the allocations it adds. It runs
// only with -overhead:
//
//	go test -run TestGRPCOverheadTable -v ./bench/ -overhead
func TestGRPCOverheadTable(t *testing.T) {
	if !*overhead {
		t.Skip("run with -overhead to measure")
	}
	results := make([][]testing.BenchmarkResult, len(grpcContenders))
	cpu := make([][]float64, len(grpcContenders))
	for range *overheadRounds {
		for i, c := range grpcContenders {
			e, err := c.start()
			if err != nil {
				t.Fatal(err)
			}
			var calls int
			before := processCPUNanos()
			results[i] = append(results[i], testing.Benchmark(func(b *testing.B) { e.run(b, c.callerDeadline); calls += b.N }))
			cpu[i] = append(cpu[i], float64(processCPUNanos()-before)/float64(calls))
			e.close()
		}
	}
	med := map[string]testing.BenchmarkResult{}
	medCPU := map[string]float64{}
	for i, rs := range results {
		slices.SortFunc(rs, func(a, b testing.BenchmarkResult) int { return int(a.NsPerOp() - b.NsPerOp()) })
		med[grpcContenders[i].name] = rs[len(rs)/2]
		slices.Sort(cpu[i])
		medCPU[grpcContenders[i].name] = cpu[i][len(cpu[i])/2]
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-34s %9s %9s %8s %10s %12s %12s %8s %11s\n", "contender", "ns/op", "cpu ns/op", "B/op", "allocs/op",
		"overhead ns", "overhead cpu", "+B/op", "+allocs/op")
	for _, c := range grpcContenders {
		m, mc := med[c.name], medCPU[c.name]
		base, bc := m, mc
		if c.base != "" {
			base, bc = med[c.base], medCPU[c.base]
		}
		fmt.Fprintf(&sb, "%-34s %9d %9.0f %8d %10d %12d %12.0f %8d %11d\n", c.name, m.NsPerOp(), mc, m.AllocedBytesPerOp(), m.AllocsPerOp(),
			m.NsPerOp()-base.NsPerOp(), mc-bc, m.AllocedBytesPerOp()-base.AllocedBytesPerOp(), m.AllocsPerOp()-base.AllocsPerOp())
	}
	t.Logf("median of %d interleaved rounds:\n%s", *overheadRounds, sb.String())
}

// processCPUNanos is the process's CPU time so far (user + system).
func processCPUNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
