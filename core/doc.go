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
package resilience
