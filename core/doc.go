// Package resilience runs callbacks through pipelines of resilience
// strategies: a timeout, a concurrency limiter with a priority queue (a
// bulkhead), and a rate limiter partitioned by key. Package inbound, in this
// module, turns them into HTTP load shedding; the adapters in this
// repository put that behind chi and other frameworks.
//
// # Pipelines
//
// A Pipeline[T] runs a callback that returns (T, error) through strategies,
// outermost first in the order they were added:
//
//	p, err := resilience.NewBuilder[int](resilience.Name("inventory")).
//		AddConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 50}).
//		AddTimeout(2 * time.Second).
//		Build() // invalid options: an error naming the field
//	n, err := p.Execute(ctx, func(ctx context.Context) (int, error) { return queryInventory(ctx, sku) })
//
// Strategies are values that implement Strategy; the builder's AddX methods
// are shortcuts over them, and AddStrategy takes any value, including a
// custom strategy or a limiter shared by several pipelines. Strategies are
// not generic, so one value serves pipelines of any T.
//
// # Context is the carrier
//
// Execute passes a context derived from the caller's to the callback. A
// pipeline executed with an HTTP request's context inherits its deadline and
// cancellation, so nested calls stop with it without threading anything new
// through. Per-execution properties ride in the context under typed keys
// (NewKey).
//
// # Errors
//
// Rejections are typed: *BulkheadRejectedError (Reason full, queue-timeout
// or dropped), *TimeoutRejectedError, *RateLimitRejectedError. Each matches
// its sentinel (ErrBulkheadRejected, ErrTimeoutRejected,
// ErrRateLimitRejected) and ErrRejected with errors.Is. Invalid options are a
// *ConfigError (errors.Is ErrInvalidOptions) whose Field names the option.
//
// # Telemetry
//
// Strategies emit named events (EventTimeout, EventRateLimiterRejected)
// labelled with the pipeline's and the strategy's names to the Listener set
// with WithListener. NewSlogListener logs them with log/slog.
//
// # Outbound strategies
//
// Retry, CircuitBreaker, Fallback and Hedging protect a service from its
// dependencies. They see the callback's value as well as its error, so
// they are ResultStrategy[T] values (RetryOptions[T], …) added with
// AddRetry, AddCircuitBreaker, AddFallback, AddHedging or
// AddResultStrategy. Every predicate and generator receives an Outcome[T];
// ExecuteOutcome returns one for callers who prefer to match on it. They
// all run under the caller's context: a request that reached its inbound
// deadline also stops its retries, hedges and waits. WithSingleAttempt
// marks a context whose operation must not be repeated. They emit
// EventRetry, EventCircuitOpened, EventCircuitClosed,
// EventCircuitHalfOpened, EventFallback, EventHedging and, per attempt of
// a retry or hedging strategy, EventExecutionAttempt with its duration.
// Package outbound, in this module, runs such a pipeline inside an
// http.RoundTripper.
//
// # Composition
//
// Order matters; put strategies in this order, outermost first, leaving
// out what you do not need:
//
//	caller's ctx
//	  │
//	  ▼
//	Fallback             answers whatever fails inside it, rejections included
//	  │
//	RateLimiter /        shed before any work is done
//	ConcurrencyLimiter
//	  │
//	Timeout (total)      bounds the whole execution, retries and delays included
//	  │
//	Retry or Hedging     repeats attempts
//	  │
//	CircuitBreaker       counts every attempt; fails the rest fast when open
//	  │
//	Timeout (attempt)    bounds each attempt, so a hung one fails and is retried
//	  │
//	  ▼
//	callback
//
// A breaker inside the retry sees every attempt and, once open, makes the
// remaining retries fail at once; a breaker outside it would see only the
// final outcomes. A fallback inside a limiter could not answer that
// limiter's rejections. composition_test.go pins this behaviour.
package resilience
