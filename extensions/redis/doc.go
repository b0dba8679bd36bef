// Package resilienceredis is a Redis rate-limit store, so the instances of
// a fleet behind a load balancer enforce one rate limit per key together
// rather than one each.
//
// Plug a Store into a rate limiter (or the inbound middleware's
// RateLimit options) as its Store:
//
//	client := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
//	store, err := resilienceredis.New(resilienceredis.Options{Client: client})
//	...
//	mw, err := inbound.New(inbound.Options{RateLimit: &resilience.RateLimiterOptions{
//		Name: "api", PermitLimit: 600, Window: time.Minute, Store: store,
//	}})
//
// Decisions are atomic Lua scripts using Redis's clock, with the same
// numbers (and so the same RateLimit-* headers) as the in-memory store. A
// Take never waits longer than Options.Budget: when Redis is slow or down
// the limiter fails open (the default, emitting
// event.RateLimiterStoreError) or closed
// (resilience.RateLimiterOptions.FailClosed), and decides again as soon as Redis
// answers. Options.Breaker puts a circuit breaker in front, so a long
// outage costs one fast failure per request instead of a budget each.
//
// Concurrency limits stay per instance by design: they protect the
// process they run in.
package resilienceredis
