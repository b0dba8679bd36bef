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
// # Redis Cluster
//
// Give a *redis.ClusterClient (with ContextTimeoutEnabled) as
// Options.Client. Each decision is one script on one key, so it runs on
// the master of that key's slot; a hash tag in the rate-limit key
// ("{tenant-7}:alice") only chooses the slot. When a master fails, the
// takes of its slots fail within the budget, and the limiter fails open
// or closed with its event, as for any outage; other slots decide as
// before. After each failed take the store asks the client to reload the
// cluster's slot map (go-redis would otherwise wait for a redirect or its
// one-minute reload), so decisions resume as soon as the replica has
// taken over: the cluster's node timeout plus an election (about 2.5 s
// with a 1 s node timeout in this package's tests; expect the node
// timeout, 15 s by default, and a little more).
//
// Redis replicates asynchronously: the takes a master acknowledged in its
// last moments and had not yet sent to its replica are lost with it, and
// their keys admit that many more in the current window. A take that
// failed at its budget may still have been counted, its reply having come
// too late; no other decision is lost or counted twice.
//
// Concurrency limits stay per instance by design: they protect the
// process they run in.
package resilienceredis
