package by_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"testing"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
)

func priorityOf(t testing.TB, f func(context.Context) int, values ...string) int {
	t.Helper()
	h := http.Header{}
	for _, v := range values {
		h.Add("X-Priority", v)
	}
	return f(adapt.NewContext(context.Background(), &inbound.Request{Header: h}))
}

// A client cannot rank itself above Min: out-of-range and malformed values
// take the default, not the nearest bound.
func TestPriorityByHeaderBelievesOnlyTheRange(t *testing.T) {
	f, err := by.Priority(by.PriorityHeader{Min: 0, Max: 9, Default: 5})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		in   []string
		want int
	}{
		{nil, 5},
		{[]string{""}, 5},
		{[]string{"0"}, 0},
		{[]string{"9"}, 9},
		{[]string{"3"}, 3},
		{[]string{"+3"}, 3},
		{[]string{"-1"}, 5},
		{[]string{"10"}, 5},
		{[]string{"-9223372036854775808"}, 5},
		{[]string{"9223372036854775807"}, 5},
		{[]string{"99999999999999999999999"}, 5},
		{[]string{"1.5"}, 5},
		{[]string{"0x1"}, 5},
		{[]string{" 1"}, 5},
		{[]string{"high"}, 5},
		{[]string{"2", "0"}, 2}, // the first value counts
	}
	for _, c := range cases {
		if got := priorityOf(t, f, c.in...); got != c.want {
			t.Errorf("X-Priority %q: got %d, want %d", c.in, got, c.want)
		}
	}
	if got := f(context.Background()); got != 5 {
		t.Errorf("no request view: got %d, want the default 5", got)
	}
}

func TestPriorityByHeaderName(t *testing.T) {
	f, err := by.Priority(by.PriorityHeader{Name: "x-class", Min: -2, Max: 2, Default: 0})
	if err != nil {
		t.Fatal(err)
	}
	ctx := adapt.NewContext(context.Background(), &inbound.Request{Header: http.Header{"X-Class": {"-2"}, "X-Priority": {"1"}}})
	if got := f(ctx); got != -2 {
		t.Fatalf("got %d, want -2 from X-Class", got)
	}
}

func TestPriorityByHeaderRejectsABadRange(t *testing.T) {
	for _, c := range []struct {
		h     by.PriorityHeader
		field string
	}{
		{by.PriorityHeader{Min: 5, Max: 1, Default: 3}, "PriorityHeader.Max"},
		{by.PriorityHeader{Min: 0, Max: 9, Default: 10}, "PriorityHeader.Default"},
		{by.PriorityHeader{Min: 0, Max: 9, Default: -1}, "PriorityHeader.Default"},
	} {
		f, err := by.Priority(c.h)
		var ce *resilience.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || f != nil {
			t.Errorf("%+v: got %v (func %v), want a *ConfigError for %s", c.h, err, f != nil, c.field)
		}
	}
}

func TestPriorityByHeaderDoesNotAllocate(t *testing.T) {
	f, _ := by.Priority(by.PriorityHeader{Min: 0, Max: 9, Default: 5})
	ctx := adapt.NewContext(context.Background(), &inbound.Request{Header: http.Header{"X-Priority": {"-7"}}})
	if n := testing.AllocsPerRun(100, func() { f(ctx) }); n != 0 {
		t.Fatalf("%v allocations per call, want 0", n)
	}
}

// Whatever a client sends, the rank lies in [Min, Max] and the function
// does not panic.
func FuzzPriorityByHeader(f *testing.F) {
	for _, s := range []string{"", "0", "-1", "9", "10", "-9223372036854775808", "+0", "1e3", "\x00"} {
		f.Add(s)
	}
	p, _ := by.Priority(by.PriorityHeader{Min: 0, Max: 9, Default: 5})
	f.Fuzz(func(t *testing.T, v string) {
		got := priorityOf(t, p, v)
		if got < 0 || got > 9 {
			t.Fatalf("X-Priority %q ranked %d, outside [0, 9]", v, got)
		}
	})
}

func ExamplePriority() {
	priority, err := by.Priority(by.PriorityHeader{Name: "X-Priority", Min: 0, Max: 9, Default: 5})
	if err != nil {
		panic(err)
	}
	for _, v := range []string{"1", "-9223372036854775808", "urgent"} {
		ctx := adapt.NewContext(context.Background(), &inbound.Request{Header: http.Header{"X-Priority": {v}}})
		fmt.Printf("%q -> %d\n", v, priority(ctx))
	}
	// Output:
	// "1" -> 1
	// "-9223372036854775808" -> 5
	// "urgent" -> 5
}

// The guide's "Priorities from client input": the header is believed only
// from the service network.
func ExamplePriority_internalCallersOnly() {
	priority, err := by.Priority(by.PriorityHeader{
		Name: "X-Priority", Min: 0, Max: 9, Default: 5,
	})
	if err != nil {
		panic(err)
	}
	internal := netip.MustParsePrefix("10.0.0.0/8") // your service network
	trusted := func(ctx context.Context) int {
		if r, ok := inbound.RequestFrom(ctx); ok && internal.Contains(r.ClientIP) {
			return priority(ctx)
		}
		return 5
	}
	for _, ip := range []string{"10.1.2.3", "203.0.113.7"} {
		ctx := adapt.NewContext(context.Background(), &inbound.Request{
			ClientIP: netip.MustParseAddr(ip),
			Header:   http.Header{"X-Priority": {"0"}},
		})
		fmt.Printf("%s -> %d\n", ip, trusted(ctx))
	}
	// Output:
	// 10.1.2.3 -> 0
	// 203.0.113.7 -> 5
}
