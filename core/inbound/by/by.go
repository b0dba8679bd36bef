// Package by builds the functions inbound.Options' limiters call per
// request from the request view: rate-limit keys and fairness flows
// (ClientIP, Header) and priorities (Priority from a header, RetriesLast
// to rank retries below first attempts):
//
//	Concurrency: &resilience.ConcurrencyLimiterOptions{
//		PermitLimit: 100, QueueLimit: 50,
//		Flow:        by.Header("X-Tenant"),
//		Priority:    by.RetriesLast(nil),
//	},
//	RateLimit: &resilience.RateLimiterOptions{PermitLimit: 100, Window: time.Second, Key: by.ClientIP},
//
// Every function reads the view with inbound.RequestFrom, never panics,
// and is safe for concurrent use.
package by

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// configError builds a *resilience.ConfigError for field.
func configError(field, problem string) error {
	return &resilience.ConfigError{Field: field, Problem: problem}
}

// ClientIP is a rate-limit key function: the client's address
// (inbound.Request.ClientKey, IPv6 grouped per inbound.ClientIPOptions.IPv6Prefix), for a
// limit per client. It serves as a limiter's Flow function too, for fair
// shares per client. Requests whose address is unknown share the key "".
func ClientIP(ctx context.Context) string {
	r, _ := inbound.RequestFrom(ctx)
	return r.ClientKey()
}

// Header returns a rate-limit key function that keys on the first
// value of the named header (an API key, a tenant ID); it serves as a
// limiter's Flow function too, for fair shares per tenant. Requests without
// the header share the key "", so combine it with an authentication step
// that rejects them, or key them otherwise with your own function.
func Header(name string) func(ctx context.Context) string {
	name = http.CanonicalHeaderKey(name)
	return func(ctx context.Context) string {
		if r, ok := inbound.RequestFrom(ctx); ok && r.Header != nil {
			return r.Header.Get(name)
		}
		return ""
	}
}

// PriorityHeader configures Priority: the header to read and the
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

// Priority returns a resilience.ConcurrencyLimiterOptions.Priority (or
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
func Priority(h PriorityHeader) (func(ctx context.Context) int, error) {
	if h.Max < h.Min {
		return nil, configError("PriorityHeader.Max", fmt.Sprintf("must be at least Min (%d), got %d", h.Min, h.Max))
	}
	if h.Default < h.Min || h.Default > h.Max {
		return nil, configError("PriorityHeader.Default", fmt.Sprintf("must lie in [Min, Max] = [%d, %d], got %d", h.Min, h.Max, h.Default))
	}
	name := h.Name
	if name == "" {
		name = "X-Priority"
	}
	name = http.CanonicalHeaderKey(name)
	return func(ctx context.Context) int {
		r, ok := inbound.RequestFrom(ctx)
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

// Headers that mark a request as a retry or a hedge: the one the outbound
// transport sends (outbound.AttemptHeader) and gRPC's own.
const (
	retryAttemptHeader = "Retry-Attempt"
	grpcAttemptsHeader = "Grpc-Previous-Rpc-Attempts"
)

// IsRetry reports whether the request of ctx's view is marked as a retry
// or a hedge: a Retry-Attempt header (as outbound.Transport sends it) or a
// grpc-previous-rpc-attempts header (as gRPC and Connect clients send
// it) with a number above 0. False without a view.
func IsRetry(ctx context.Context) bool {
	r, ok := inbound.RequestFrom(ctx)
	if !ok || r.Header == nil {
		return false
	}
	return positive(r.Header.Get(retryAttemptHeader)) || positive(r.Header.Get(grpcAttemptsHeader))
}

// positive reports whether s is a decimal number above 0, without
// allocating.
func positive(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	nonZero := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return false
		}
		nonZero = nonZero || c != '0'
	}
	return nonZero
}

// RetriesLast returns a priority function that ranks marked retries and
// hedges (IsRetry) just below first attempts of the same priority, so
// that under overload the queue serves fresh work first and, with
// resilience.OverflowDropLowestPriority, sheds repeated work first. base
// is the priority function it refines; nil means every request has
// priority 0.
//
// Priorities keep their order: base priority p becomes 2p for a first
// attempt and 2p+1 for a retry, so a retry still outranks every request
// of a lower base priority. Use it as ConcurrencyLimiterOptions.Priority
// or AdaptiveLimiterOptions.Priority.
func RetriesLast(base func(ctx context.Context) int) func(ctx context.Context) int {
	return func(ctx context.Context) int {
		p := 0
		if base != nil {
			p = base(ctx)
		}
		// Clamp so that doubling cannot overflow.
		p = min(max(p, math.MinInt/2), math.MaxInt/2-1)
		p *= 2
		if IsRetry(ctx) {
			p++
		}
		return p
	}
}
