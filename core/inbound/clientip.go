package inbound

import (
	"net/netip"
	"strings"
)

// ClientIPOptions says how the client's address is found. The zero value
// trusts no proxy: the client is the peer of the connection, and
// X-Forwarded-For is ignored, since any client can send one. New reports
// invalid values as a *resilience.ConfigError.
type ClientIPOptions struct {
	// TrustedProxies lists the networks of the proxies in front of the
	// service (load balancers, ingress); nil trusts none, so the peer is
	// the client. When the peer is in one of them,
	// X-Forwarded-For is walked from the right, skipping addresses in these
	// networks, and the first address outside them is the client. Values
	// to the left of it were written by the client and are never used.
	TrustedProxies []netip.Prefix
	// IPv6Prefix, when not 0, groups IPv6 clients by network for keys
	// (by.ClientIP, Request.ClientKey): a client usually controls a
	// whole /64, so keying on single addresses would let it rotate through
	// them. Between 1 and 128; 0 keeps the full address. IPv4 addresses
	// are never grouped.
	IPv6Prefix int
}

func (o ClientIPOptions) validate() error {
	for i, p := range o.TrustedProxies {
		if !p.IsValid() {
			return configError("ClientIPOptions.TrustedProxies",
				"entry %d is not a valid network prefix", i)
		}
	}
	if o.IPv6Prefix < 0 || o.IPv6Prefix > 128 {
		return configError("ClientIPOptions.IPv6Prefix",
			"must be between 0 and 128, got %d", o.IPv6Prefix)
	}
	return nil
}

// trusted reports whether a is in one of the trusted networks.
func (o *ClientIPOptions) trusted(a netip.Addr) bool {
	for _, p := range o.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ResolveClientIP returns the client's address for a request whose
// connection peer is remoteAddr ("host:port" as in http.Request.RemoteAddr,
// or a bare address) and whose X-Forwarded-For header lines are xff, in the
// order they arrived.
//
// If the peer is not a trusted proxy, the peer is the client. Otherwise the
// header values are walked from the right: each trusted address is a proxy
// hop and is skipped; the first untrusted address is the client. A
// malformed entry ends the walk, because nothing to its left can be
// trusted: the client is then the last address known good (the nearest
// trusted hop). The result is the invalid zero Addr only if remoteAddr
// itself cannot be parsed. IPv4-mapped IPv6 addresses are unmapped and
// zones dropped, so one client has one form.
//
// It allocates nothing and is safe for concurrent use.
func resolveClientIP(remoteAddr string, xff []string, opts ClientIPOptions) netip.Addr {
	peer, ok := parseIP(remoteAddr)
	if !ok || len(opts.TrustedProxies) == 0 || !opts.trusted(peer) {
		return peer
	}
	client := peer
	for i := len(xff) - 1; i >= 0; i-- {
		line := xff[i]
		for len(line) > 0 {
			var item string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				item, line = line[j+1:], line[:j]
			} else {
				item, line = line, ""
			}
			item = strings.TrimSpace(item)
			if item == "" {
				continue // "a,,b" or a trailing comma: no hop, nothing claimed
			}
			a, ok := parseIP(item)
			if !ok {
				return client
			}
			client = a
			if !opts.trusted(a) {
				return a
			}
		}
	}
	// Every hop was a trusted proxy: the leftmost is the farthest we know.
	return client
}

// parseIP parses a bare address or an address with a port: the peer
// always has one, and forwarded values sometimes do ("203.0.113.7:4711",
// "[2001:db8::1]:443"). A zone only means something on the local link, so
// it is dropped, as is the IPv4-in-IPv6 mapping.
func parseIP(s string) (netip.Addr, bool) {
	// Pick the parser by shape rather than trying one and then the other:
	// a failed parse allocates its error, and this runs per request.
	var a netip.Addr
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	} else {
		var err error
		if a, err = netip.ParseAddr(s); err != nil {
			return netip.Addr{}, false
		}
	}
	return a.Unmap().WithZone(""), true
}

// clientKey renders a as a key, grouping IPv6 addresses to bits.
func clientKey(a netip.Addr, bits int) string {
	if !a.IsValid() {
		return ""
	}
	if bits > 0 && bits < 128 && a.Is6() {
		p, err := a.Prefix(bits)
		if err == nil {
			return p.String()
		}
	}
	return a.String()
}
