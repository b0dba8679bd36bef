// Package ratelimit holds what a rate limiter's counters are made of: the
// Store interface and its in-memory implementation (MemoryStore), the
// Policy a store applies, the Decision it returns, and the three counting
// algorithms. Import it to pick an algorithm, to share counters between
// limiters or instances (a Store of your own, as the Redis extension
// provides), or to read a decision's numbers; the limiter itself,
// resilience.RateLimiter, is in package resilience.
package ratelimit
