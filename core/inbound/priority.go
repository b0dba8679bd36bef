package inbound

import (
	"context"
	"net/http"
	"strconv"
)

// PriorityHeader configures PriorityByHeader: the header to read and the
// range of priorities a caller may ask for.
type PriorityHeader struct {
	// Name is the header field, "X-Priority" when empty.
	Name string
	// Min and Max bound the values believed, inclusive: lower runs sooner,
	// so Min is the best rank a request can take.
	Min, Max int
	// Default is the rank of a request whose header is missing, is not a
	// decimal integer, or lies outside [Min, Max]. It must lie in the range.
	Default int
}

// PriorityByHeader returns a ConcurrencyLimiterOptions.Priority (or
// AdaptiveLimiterOptions.Priority) function that ranks a request by a
// header it carries, for services whose callers say how important a
// request is.
//
// A value outside [Min, Max] ranks as Default, not as the nearest bound: a
// client that sends "-9223372036854775808" must not jump the queue. The
// header is client input; trust it only from callers you control (see
// the guide's "Priorities from client input") or keep Min at the rank of
// ordinary traffic. The function never panics and does not allocate.
//
// It returns a *resilience.ConfigError when Max < Min or Default is out of
// the range.
func PriorityByHeader(h PriorityHeader) (func(ctx context.Context) int, error) {
	if h.Max < h.Min {
		return nil, configError("PriorityHeader.Max", "must be at least Min (%d), got %d", h.Min, h.Max)
	}
	if h.Default < h.Min || h.Default > h.Max {
		return nil, configError("PriorityHeader.Default", "must lie in [Min, Max] = [%d, %d], got %d", h.Min, h.Max, h.Default)
	}
	name := h.Name
	if name == "" {
		name = "X-Priority"
	}
	name = http.CanonicalHeaderKey(name)
	return func(ctx context.Context) int {
		r, ok := RequestFrom(ctx)
		if !ok || r.Header == nil {
			return h.Default
		}
		return h.parse(r.Header.Get(name))
	}, nil
}

// parse maps one header value to a rank: in-range decimal integers are
// believed, anything else is Default.
func (h PriorityHeader) parse(v string) int {
	if v == "" || len(v) > 20 { // longer than any int64: malformed
		return h.Default
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < h.Min || p > h.Max {
		return h.Default
	}
	return p
}
