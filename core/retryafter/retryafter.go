// Package retryafter reads the waits a server asks its clients for: the
// HTTP Retry-After header (Parse), gRPC's grpc-retry-pushback-ms trailer
// (ParsePushback) and the wait an error carries (Of: a Hint, or a rate
// limiter's rejection). Delay, as RetryOptions.DelayGenerator, makes a
// Retry wait what the server asked for; package outbound does that itself.
package retryafter

import (
	"strconv"
	"strings"
	"time"

	"github.com/ylcnfrht/resilience/core/internal/config"
)

// maxDuration caps a parsed wait (100 years), so that adding it to
// time.Now never overflows.
const maxDuration = config.MaxDuration

// httpDateLayouts are the three date forms HTTP allows in Retry-After
// (RFC 9110 §5.6.7): IMF-fixdate first, then the obsolete RFC 850 and
// asctime forms.
var httpDateLayouts = [...]string{
	"Mon, 02 Jan 2006 15:04:05 GMT",
	"Monday, 02-Jan-06 15:04:05 GMT",
	"Mon Jan _2 15:04:05 2006",
}

// Parse parses an HTTP Retry-After value, either delay-seconds
// ("120") or an HTTP date, relative to now. A date in the past is 0. It
// reports false for anything else, including negative numbers. The result
// is capped at 100 years.
func Parse(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return maxDuration, true
			}
			return 0, false
		}
		if secs >= uint64(maxDuration/time.Second) {
			return maxDuration, true
		}
		return time.Duration(secs) * time.Second, true
	}
	for _, layout := range httpDateLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			d := t.Sub(now)
			return min(max(d, 0), maxDuration), true
		}
	}
	return 0, false
}

// ParsePushback parses gRPC's grpc-retry-pushback-ms trailer: a
// non-negative number of milliseconds. It reports false for a negative or
// malformed value, which gRPC defines as "do not retry". The result is
// capped at 100 years.
func ParsePushback(v string) (time.Duration, bool) {
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange && !strings.HasPrefix(strings.TrimSpace(v), "-") {
			return maxDuration, true
		}
		return 0, false
	}
	if ms < 0 {
		return 0, false
	}
	if ms >= int64(maxDuration/time.Millisecond) {
		return maxDuration, true
	}
	return time.Duration(ms) * time.Millisecond, true
}

// Format is the Retry-After value for a wait of d, as every rejection of
// this module carries it: delay-seconds, rounded up, at least 1 ("1" for
// 300ms, "3" for 2.1s). It is the one formatter of the header: the
// inbound middleware and every adapter (connect's error metadata, gRPC's
// trailers) send what it returns.
func Format(d time.Duration) string { return strconv.FormatInt(Seconds(d), 10) }

// Seconds is Format's number: d in whole seconds, rounded up, at least 1.
func Seconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return max(s, 1)
}
