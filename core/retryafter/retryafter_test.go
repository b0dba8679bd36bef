package retryafter

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{" 0 ", 0, true},
		{"Fri, 02 Jan 2026 03:04:35 GMT", 30 * time.Second, true},
		{"Friday, 02-Jan-26 03:05:05 GMT", time.Minute, true},
		{"Fri Jan  2 03:04:15 2026", 10 * time.Second, true},
		{"Thu, 01 Jan 2026 00:00:00 GMT", 0, true}, // past
		{"99999999999999999999999", maxDuration, true},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"", 0, false},
	}
	for _, c := range cases {
		d, ok := Parse(c.in, now)
		if d != c.want || ok != c.ok {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", c.in, d, ok, c.want, c.ok)
		}
	}
}

func TestParsePushback(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"250", 250 * time.Millisecond, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"x", 0, false},
		{"99999999999999999999999", maxDuration, true},
		{"-99999999999999999999999", 0, false},
	}
	for _, c := range cases {
		d, ok := ParsePushback(c.in)
		if d != c.want || ok != c.ok {
			t.Errorf("ParsePushback(%q) = %v, %v; want %v, %v", c.in, d, ok, c.want, c.ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"120", "Fri, 02 Jan 2026 03:04:35 GMT", "-1", "", "18446744073709551616"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		if d, ok := Parse(s, now); d < 0 || d > maxDuration || (!ok && d != 0) {
			t.Fatalf("Parse(%q) = %v, %v", s, d, ok)
		}
		if d, ok := ParsePushback(s); d < 0 || d > maxDuration || (!ok && d != 0) {
			t.Fatalf("ParsePushback(%q) = %v, %v", s, d, ok)
		}
	})
}
