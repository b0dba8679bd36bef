package adapt

import "strings"

// RateLimitFields returns the names of the header fields inbound may set
// on the responses of a rate-limited route (through Framework.SetHeader,
// or the ResponseWriter), in their canonical form: RateLimit-Limit,
// RateLimit-Remaining and RateLimit-Reset of the split style,
// RateLimit-Policy and RateLimit of the structured one. For an adapter
// that carries them over to an answer it builds aside (fiber's 504 at the
// deadline). An array: reading it allocates nothing.
func RateLimitFields() [5]string {
	return [...]string{"Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset", "Ratelimit-Policy", "Ratelimit"}
}

// FieldKey returns a header field's name in lower case, as gRPC metadata
// and HTTP/2 carry it, without allocating for the fields inbound sets
// (Retry-After and the RateLimit fields), for an adapter that sends them
// as metadata (the gRPC adapter).
func FieldKey(name string) string {
	switch name {
	case "Retry-After":
		return "retry-after"
	case "Ratelimit-Limit":
		return "ratelimit-limit"
	case "Ratelimit-Remaining":
		return "ratelimit-remaining"
	case "Ratelimit-Reset":
		return "ratelimit-reset"
	case "Ratelimit-Policy":
		return "ratelimit-policy"
	case "Ratelimit":
		return "ratelimit"
	}
	return strings.ToLower(name)
}
