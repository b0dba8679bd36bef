package bench

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
)

var (
	overhead       = flag.Bool("overhead", false, "run TestOverheadTable: every contender, interleaved, as a table of overhead over Bare")
	overheadRounds = flag.Int("overhead.rounds", 5, "rounds of TestOverheadTable; each contender's median is reported")
)

// TestOverheadTable measures every contender in interleaved rounds (so a
// burst of noise on a shared machine hits them all alike) and prints each
// one's median next to the bare handler's: the overhead in ns, and the
// ratio to Bare. It only runs with -overhead:
//
//	go test -run TestOverheadTable -v ./bench/ -overhead
func TestOverheadTable(t *testing.T) {
	if !*overhead {
		t.Skip("run with -overhead to measure")
	}
	cs := allContenders()
	results := make([][]testing.BenchmarkResult, len(cs))
	for range *overheadRounds {
		for i, c := range cs {
			h, err := c.build()
			if err != nil {
				t.Fatal(err)
			}
			results[i] = append(results[i], testing.Benchmark(func(b *testing.B) { serve(b, h) }))
		}
	}
	med := make([]testing.BenchmarkResult, len(cs))
	for i, rs := range results {
		slices.SortFunc(rs, func(a, b testing.BenchmarkResult) int { return int(a.NsPerOp() - b.NsPerOp()) })
		med[i] = rs[len(rs)/2]
	}
	bare := float64(med[0].NsPerOp()) // peers[0] is Bare
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-26s %9s %8s %10s %12s %8s\n", "contender", "ns/op", "B/op", "allocs/op", "overhead ns", "× bare")
	for i, c := range cs {
		ns := float64(med[i].NsPerOp())
		fmt.Fprintf(&sb, "%-26s %9.0f %8d %10d %12.0f %8.2f\n",
			c.name, ns, med[i].AllocedBytesPerOp(), med[i].AllocsPerOp(), ns-bare, ns/bare)
	}
	t.Logf("median of %d interleaved rounds:\n%s", *overheadRounds, sb.String())
}
