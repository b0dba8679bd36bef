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
//     shutdown, Stats for health checks and dashboards, Reconfigure to
//     change the limits while serving (Stats.Config shows them);
//   - the request view (Request, RequestFrom) that key, flow and priority
//     functions read; package core/inbound/by has ready-made ones
//     (by.ClientIP, by.Header, by.Priority, by.RetriesLast);
//   - package core/inbound/ready, the readiness probe that fails before
//     Drain starts refusing.
//
// With a framework, use its adapter (adapters/chi, gin, echo, fiber,
// connect, grpc), which returns this package's Middleware for Drain and
// Stats. Writing an adapter takes package core/inbound/adapt, the kit
// adapters are built with.
//
// Rejections are JSON, rendered once at start-up, and never carry
// internal error text: 503 BULKHEAD_FULL (reason full, queue-timeout,
// dropped or shutting-down) with Retry-After: 1 (Options.RetryAfter) when
// the server is at capacity, 429 RATE_LIMITED with Retry-After and
// RateLimit fields when a key's quota is spent, 504 TIMEOUT when the
// request's budget (Options.Timeout, from arrival by default) is spent,
// when the handler's context ends too. Options.Render replaces the
// rendering.
//
// The response for every situation, the middleware's guarantees (the 504
// on time over HTTP/1 and HTTP/2, committed responses, disconnects,
// Drain), how the adaptive limit counts requests, the request view and
// client IPs, and how to write an adapter are in the guide,
// https://github.com/ylcnfrht/resilience/blob/main/docs/guide.md#the-inbound-package;
// the layering and the invariants every adapter keeps in
// https://github.com/ylcnfrht/resilience/blob/main/docs/DESIGN.md.
package inbound
