package resilience

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// enumCase describes one string enum: its values, its default (what ""
// parses to), the option field its errors name, and its parser.
type enumCase struct {
	name   string
	values []string
	def    string
	field  string
	parse  func(string) (string, error)
}

func enumCases() []enumCase {
	return []enumCase{
		{"BackoffType", strs(BackoffConstant, BackoffLinear, BackoffExponential), string(BackoffConstant), "RetryOptions.BackoffType",
			func(s string) (string, error) { v, err := ParseBackoffType(s); return string(v), err }},
		{"OverflowPolicy", strs(OverflowRejectNew, OverflowDropOldest, OverflowDropLowestPriority), "", "ConcurrencyLimiterOptions.Overflow",
			func(s string) (string, error) { v, err := ParseOverflowPolicy(s); return string(v), err }},
		{"ratelimit.Algorithm", strs(ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.TokenBucket), string(ratelimit.FixedWindow), "Policy.Algorithm",
			func(s string) (string, error) { v, err := ratelimit.ParseAlgorithm(s); return string(v), err }},
	}
}

func strs[E ~string](values ...E) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// Invariant: every Parse function follows one rule. Each value
// round-trips through its string; case, surrounding space and '_' for '-'
// are ignored; "" is the default; anything else is a *ConfigError naming
// the option field, quoting the input and listing every accepted name.
func TestParseEnums(t *testing.T) {
	for _, c := range enumCases() {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range c.values {
				for _, in := range []string{v, strings.ToUpper(v), " " + v + "\t", strings.ReplaceAll(v, "-", "_")} {
					if got, err := c.parse(in); err != nil || got != v {
						t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, v)
					}
				}
			}
			if got, err := c.parse(" "); err != nil || got != c.def {
				t.Errorf("Parse(blank) = %q, %v; want the default %q", got, err, c.def)
			}
			_, err := c.parse("no-such-value")
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(ce.Problem, `"no-such-value"`) {
				t.Fatalf("Parse(unknown) = %v; want a *ConfigError for %s quoting the input", err, c.field)
			}
			listed := make([]string, len(c.values))
			for i, v := range c.values {
				listed[i] = strconv.Quote(v)
			}
			if want := "want one of " + strings.Join(listed, ", "); !strings.HasSuffix(ce.Problem, want) {
				t.Errorf("error %q does not end %q: it must list exactly the accepted names", ce.Problem, want)
			}
		})
	}
}

// FuzzParseEnums: no parser panics; what one accepts is one of its values,
// and it accepts an input exactly when the normalised input is a value or
// empty.
func FuzzParseEnums(f *testing.F) {
	for _, s := range []string{"", "constant", "Drop_Oldest", " token-bucket ", "x", "\x00", "ſliding-window", "drop-oldest "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
		for _, c := range enumCases() {
			got, err := c.parse(s)
			want := c.def
			valid := n == ""
			for _, v := range c.values {
				if n == v {
					valid, want = true, v
				}
			}
			if valid != (err == nil) || (valid && got != want) {
				t.Fatalf("%s: Parse(%q) = %q, %v", c.name, s, got, err)
			}
		}
	})
}
