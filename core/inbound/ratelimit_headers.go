package inbound

import (
	"github.com/ylcnfrht/resilience/core/internal/config"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// RateLimitHeaderStyle chooses the header fields that describe the rate
// limit on responses of a rate-limited route. Its values are stable
// strings for configuration files, as core's option enums; the empty
// string means RateLimitHeadersSplit.
type RateLimitHeaderStyle string

const (
	// RateLimitHeadersSplit (the default) sends RateLimit-Limit,
	// RateLimit-Remaining and RateLimit-Reset (seconds), the widely
	// deployed form of the IETF draft's earlier revisions.
	RateLimitHeadersSplit RateLimitHeaderStyle = "split"
	// RateLimitHeadersStructured sends the structured fields of
	// draft-ietf-httpapi-ratelimit-headers-09:
	// RateLimit-Policy: "name";q=600;w=60 and RateLimit: "name";r=599;t=42.
	RateLimitHeadersStructured RateLimitHeaderStyle = "structured"
	// RateLimitHeadersOff sends no RateLimit fields. A 429 still carries
	// Retry-After.
	RateLimitHeadersOff RateLimitHeaderStyle = "off"
)

var rateLimitHeaderStyles = []RateLimitHeaderStyle{RateLimitHeadersSplit, RateLimitHeadersStructured, RateLimitHeadersOff}

// parseRateLimitHeaderStyle returns the style named by s, by the rule of
// every Parse function in these packages: case, surrounding space and '_'
// for '-' are ignored, and "" is RateLimitHeadersSplit. Anything else is a
// *resilience.ConfigError that lists the accepted names.
func parseRateLimitHeaderStyle(s string) (RateLimitHeaderStyle, error) {
	if v, ok := config.ParseEnum(s, RateLimitHeadersSplit, rateLimitHeaderStyles...); ok {
		return v, nil
	}
	return "", config.UnknownEnum("Options.RateLimitHeaders", "rate-limit header style", s, rateLimitHeaderStyles...)
}

// Canonical keys, assigned directly to skip canonicalisation per request.
const (
	hdrLimit      = "Ratelimit-Limit"
	hdrRemaining  = "Ratelimit-Remaining"
	hdrReset      = "Ratelimit-Reset"
	hdrPolicy     = "Ratelimit-Policy"
	hdrRateLimit  = "Ratelimit"
	hdrRetryAfter = "Retry-After"
)

// structuredName renders a policy name as a structured-field string
// ("name"), replacing what sf-string cannot carry and escaping the rest.
func structuredName(name string) string {
	if name == "" {
		name = "default"
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('_')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// policyField renders the RateLimit-Policy value, once per policy.
func policyField(p ratelimit.Policy) string {
	return structuredName(p.Name) + ";q=" + strconv.Itoa(p.Limit) +
		";w=" + strconv.FormatInt(ceilSeconds(p.Window, 1), 10)
}

// setRateLimitFields sets the RateLimit fields for one decision on h.
func (m *Middleware) setRateLimitFields(h http.Header, limit, remaining int, reset time.Duration) {
	if remaining < 0 {
		remaining = 0
	}
	switch m.opts.RateLimitHeaders {
	case RateLimitHeadersSplit:
		h[hdrLimit] = []string{strconv.Itoa(limit)}
		h[hdrRemaining] = []string{strconv.Itoa(remaining)}
		h[hdrReset] = []string{strconv.FormatInt(ceilSeconds(reset, 0), 10)}
	case RateLimitHeadersStructured:
		h[hdrPolicy] = *m.policyValue.Load()
		h[hdrRateLimit] = []string{m.policyName + ";r=" + strconv.Itoa(remaining) +
			";t=" + strconv.FormatInt(ceilSeconds(reset, 0), 10)}
	}
}
