package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// The defaults are docs/DESIGN.md's inbound table: timeout 5 s, 200 permits, a queue of 100
// with a 500 ms queue timeout, reject-new, no rate limit, loopback on a
// free port.
func TestParseConfigDefaults(t *testing.T) {
	cfg, err := parseConfig(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		framework:    "chi",
		addr:         "127.0.0.1:0",
		timeout:      5 * time.Second,
		permitLimit:  200,
		queueLimit:   100,
		queueTimeout: 500 * time.Millisecond,
		overflow:     resilience.OverflowDropLowestPriority,
		rateLimit:    0,
		rateWindow:   time.Second,
		rateKey:      rateKey{},
	}
	if cfg != want {
		t.Fatalf("defaults:\n got %+v\nwant %+v", cfg, want)
	}
}

func TestParseConfigEveryFlag(t *testing.T) {
	cfg, err := parseConfig(strings.Fields(
		"-framework chi -addr 127.0.0.1:8080 -timeout 2s -permit-limit 7 -queue-limit 0 -queue-timeout 0 "+
			"-overflow drop-lowest-priority -rate-limit 10 -rate-window 1m -rate-key header:x-api-key"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		framework:    "chi",
		addr:         "127.0.0.1:8080",
		timeout:      2 * time.Second,
		permitLimit:  7,
		queueLimit:   0,
		queueTimeout: 0,
		overflow:     resilience.OverflowDropLowestPriority,
		rateLimit:    10,
		rateWindow:   time.Minute,
		rateKey:      rateKey{header: "X-Api-Key"},
	}
	if cfg != want {
		t.Fatalf("\n got %+v\nwant %+v", cfg, want)
	}
	if cfg.rateKey.String() != "header:X-Api-Key" || (rateKey{}).String() != "ip" {
		t.Errorf("rateKey.String: %q, %q", cfg.rateKey, rateKey{})
	}
}

func TestParseConfigOverflowPolicies(t *testing.T) {
	for _, p := range []resilience.OverflowPolicy{resilience.OverflowRejectNew, resilience.OverflowDropOldest, resilience.OverflowDropLowestPriority} {
		cfg, err := parseConfig([]string{"-overflow", string(p)}, io.Discard)
		if err != nil || cfg.overflow != p {
			t.Errorf("-overflow %s: %v %v", p, cfg.overflow, err)
		}
	}
}

// Every validation error of ours is a *flagError carrying the flag's name,
// and its message starts with it.
func TestParseConfigErrorsCarryTheFlag(t *testing.T) {
	for args, flagName := range map[string]string{
		"-framework nope":     "framework",
		"-timeout 0s":         "timeout",
		"-permit-limit -5":    "permit-limit",
		"-queue-limit -1":     "queue-limit",
		"-queue-timeout -1s":  "queue-timeout",
		"-overflow lifo":      "overflow",
		"-rate-limit -2":      "rate-limit",
		"-rate-window -1s":    "rate-window",
		"-rate-key header:a:": "rate-key",
	} {
		_, err := parseConfig(strings.Fields(args), io.Discard)
		var fe *flagError
		if !errors.As(err, &fe) || fe.flag != flagName {
			t.Errorf("%s: got %v, want a *flagError for %s", args, err, flagName)
			continue
		}
		if !strings.HasPrefix(err.Error(), "invalid -"+flagName+": ") {
			t.Errorf("%s: message %q does not start with the flag", args, err)
		}
	}
}

// FuzzParseRateKey: any -rate-key value either parses to "ip" or a valid
// header name, or is a *flagError naming -rate-key; never a panic.
func FuzzParseRateKey(f *testing.F) {
	for _, s := range []string{"ip", "header:X-Api-Key", "header:", "header", "IP", "header:a b", "header:\x00", "header:Ä"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := parseRateKey(s)
		if err != nil {
			var fe *flagError
			if !errors.As(err, &fe) || fe.flag != "rate-key" {
				t.Fatalf("%q: error %v is not a -rate-key flagError", s, err)
			}
			return
		}
		if s == "ip" {
			if k.header != "" {
				t.Fatalf("ip parsed as header %q", k.header)
			}
			return
		}
		if !validHeaderName(k.header) || !strings.EqualFold("header:"+k.header, s) {
			t.Fatalf("%q parsed to %q", s, k.header)
		}
	})
}

// FuzzRequestPriority: any header value ranks in [minPriority,
// maxPriority] without panicking, and anything that is not a plain integer
// gives the default.
func FuzzRequestPriority(f *testing.F) {
	for _, s := range []string{"", "0", "-1", "+7", "x", "9223372036854775808", "-9223372036854775808", " 3", "3 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := priorityOf(s)
		if p < minPriority || p > maxPriority {
			t.Fatalf("%q ranked %d, outside [%d, %d]", s, p, minPriority, maxPriority)
		}
		if p != defaultPriority && strings.TrimLeft(s, "+-0123456789") != "" {
			t.Fatalf("%q gave %d, want the default for a non-integer", s, p)
		}
	})
}
