package inbound

import (
	"net/netip"
	"strings"
	"testing"
)

func mustPrefixes(t testing.TB, ss ...string) []netip.Prefix {
	t.Helper()
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// Invariant: X-Forwarded-For is believed only from trusted proxies, walked
// from the right, and a malformed or client-written value is never the key.
func TestResolveClientIP(t *testing.T) {
	trusted := ClientIPOptions{TrustedProxies: mustPrefixes(t, "10.0.0.0/8", "2001:db8:ffff::/48")}
	cases := []struct {
		name   string
		remote string
		xff    []string
		opts   ClientIPOptions
		want   string
	}{
		{"peer by default", "203.0.113.7:5555", nil, ClientIPOptions{}, "203.0.113.7"},
		{"xff ignored without trusted proxies", "203.0.113.7:5555", []string{"198.51.100.1"}, ClientIPOptions{}, "203.0.113.7"},
		{"xff ignored from untrusted peer", "203.0.113.7:5555", []string{"198.51.100.1"}, trusted, "203.0.113.7"},
		{"one trusted hop", "10.1.2.3:80", []string{"198.51.100.1"}, trusted, "198.51.100.1"},
		{"walked from the right past trusted hops", "10.1.2.3:80", []string{"6.6.6.6, 198.51.100.1, 10.9.9.9"}, trusted, "198.51.100.1"},
		{"several header lines, last line is nearest", "10.1.2.3:80", []string{"6.6.6.6", "198.51.100.1,10.0.0.2", "10.0.0.1"}, trusted, "198.51.100.1"},
		{"spoofed left part never used", "10.1.2.3:80", []string{"1.1.1.1, 2.2.2.2"}, trusted, "2.2.2.2"},
		{"all hops trusted: leftmost", "10.1.2.3:80", []string{"10.0.0.5, 10.0.0.6"}, trusted, "10.0.0.5"},
		{"malformed ends the walk at the nearest trusted hop", "10.1.2.3:80", []string{"198.51.100.1, garbage"}, trusted, "10.1.2.3"},
		{"malformed behind a trusted hop", "10.1.2.3:80", []string{"198.51.100.1, bad, 10.0.0.7"}, trusted, "10.0.0.7"},
		{"empty items skipped", "10.1.2.3:80", []string{"198.51.100.1,, "}, trusted, "198.51.100.1"},
		{"entry with port", "10.1.2.3:80", []string{"198.51.100.1:4711"}, trusted, "198.51.100.1"},
		{"bracketed v6 with port", "10.1.2.3:80", []string{"[2001:db8::1]:443"}, trusted, "2001:db8::1"},
		{"v6 peer", "[2001:db8::5]:443", nil, ClientIPOptions{}, "2001:db8::5"},
		{"v6 trusted peer", "[2001:db8:ffff::1]:443", []string{"2001:db8:1::9"}, trusted, "2001:db8:1::9"},
		{"mapped v4 unmapped", "[::ffff:203.0.113.9]:1", nil, ClientIPOptions{}, "203.0.113.9"},
		{"zone dropped", "[fe80::1%eth0]:1", nil, ClientIPOptions{}, "fe80::1"},
		{"bare peer address", "203.0.113.7", nil, ClientIPOptions{}, "203.0.113.7"},
		{"unparseable peer", "@", nil, ClientIPOptions{}, "invalid IP"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := resolveClientIP(c.remote, c.xff, c.opts)
			if got.String() != c.want {
				t.Fatalf("ResolveClientIP(%q, %q) = %v, want %s", c.remote, c.xff, got, c.want)
			}
		})
	}
}

// Invariant 6 (keys): a client holding a whole IPv6 network gets one key
// when grouping is on; IPv4 is never grouped.
func TestClientKeyIPv6Grouping(t *testing.T) {
	for _, c := range []struct {
		ip   string
		bits int
		want string
	}{
		{"2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff::1", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", 0, "2001:db8:1:2:3:4:5:6"},
		{"2001:db8:1:2:3:4:5:6", 128, "2001:db8:1:2:3:4:5:6"},
		{"203.0.113.7", 64, "203.0.113.7"},
	} {
		r := &Request{ClientIP: netip.MustParseAddr(c.ip), ipv6Prefix: c.bits}
		if got := r.ClientKey(); got != c.want {
			t.Errorf("ClientKey(%s, /%d) = %q, want %q", c.ip, c.bits, got, c.want)
		}
	}
	if got := (&Request{}).ClientKey(); got != "" {
		t.Errorf("unknown address key = %q, want empty", got)
	}
}

func TestResolveClientIPAllocatesNothing(t *testing.T) {
	opts := ClientIPOptions{TrustedProxies: mustPrefixes(t, "10.0.0.0/8")}
	xff := []string{"6.6.6.6, 198.51.100.1, 10.9.9.9"}
	if n := testing.AllocsPerRun(100, func() { resolveClientIP("10.1.2.3:80", xff, opts) }); n != 0 {
		t.Fatalf("allocs = %v, want 0", n)
	}
}

// FuzzClientIP: parsing X-Forwarded-For never panics, and the answer is
// always the peer or one of the forwarded entries; an untrusted peer is
// always the answer.
func FuzzClientIP(f *testing.F) {
	f.Add("10.1.2.3:80", "198.51.100.1, 10.0.0.1")
	f.Add("203.0.113.7:1", "1.2.3.4")
	f.Add("10.0.0.1:1", ",,, ,")
	f.Add("10.0.0.1:1", "[2001:db8::1]:443, garbage, 10.0.0.2")
	f.Add("[::ffff:10.0.0.1]:1", "::ffff:1.2.3.4%eth0")
	f.Add("", "")
	opts := ClientIPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	f.Fuzz(func(t *testing.T, remote, xff string) {
		got := resolveClientIP(remote, []string{xff}, opts)
		peer, ok := parseIP(remote)
		if !ok {
			if got.IsValid() {
				t.Fatalf("unparseable peer %q gave %v", remote, got)
			}
			return
		}
		if got == peer {
			return
		}
		if !opts.trusted(peer) {
			t.Fatalf("untrusted peer %v, got %v", peer, got)
		}
		for _, item := range strings.Split(xff, ",") {
			if a, ok := parseIP(strings.TrimSpace(item)); ok && a == got {
				return
			}
		}
		t.Fatalf("result %v is neither the peer nor a forwarded entry of %q", got, xff)
	})
}
