// Package inbound is the server side of resilience: it puts the inbound
// pipeline in front of request handlers, independent of the HTTP
// framework, and ships the plain net/http middleware. Every request goes
// through, in this order:
//
//	rate limit (optional, per key, 429) → concurrency limiter (cap + short priority queue, 503) → timeout (504)
//
// Most callers want:
//
//   - Options (Concurrency or Adaptive, Timeout, RateLimit) and New, for a
//     Middleware whose Handler wraps a net/http handler; Drain at
//     shutdown, Stats for health checks and dashboards;
//   - KeyByClientIP, KeyByHeader and PriorityByHeader, the ready-made key
//     and priority functions, which read the request view (RequestFrom);
//   - to write an adapter, NewFor with a Framework, the entry points Serve,
//     ExecuteInPlace and Execute, Render for rejections, and DetachHTTP2
//     around a router that recycles its context (gin, echo) so a 504
//     ends its HTTP/2 stream cleanly.
//
// Rejections are JSON, rendered once at start-up, and never carry
// internal error text: 503 BULKHEAD_FULL (reason full, queue-timeout,
// dropped or shutting-down) when the server is at capacity, 429
// RATE_LIMITED with Retry-After and RateLimit fields when a key's quota
// is spent, 504 TIMEOUT at the deadline, when the handler's context ends
// too. Options.Render replaces the rendering.
//
// The response for every situation, the middleware's guarantees (the 504
// on time over HTTP/1 and HTTP/2, committed responses, disconnects,
// Drain), how the adaptive limit counts requests, the request view and
// client IPs, and how to write an adapter are in the guide,
// https://github.com/ylcnfrht/resilience/blob/main/docs/guide.md#the-inbound-package;
// the layering and the invariants every adapter keeps in
// https://github.com/ylcnfrht/resilience/blob/main/docs/DESIGN.md.
package inbound
