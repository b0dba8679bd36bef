// Package resilience runs callbacks through pipelines of resilience
// strategies: a timeout, a concurrency limiter with a priority queue (a
// bulkhead), an adaptive concurrency limiter, a rate limiter partitioned by
// key, retry, circuit breaker, fallback and hedging. Package inbound, in
// this module, turns the first ones into HTTP load shedding, and package
// outbound wraps an http.RoundTripper in a pipeline; the adapters in this
// repository put the inbound side behind chi and other frameworks.
// Package limit holds the adaptive limiter's algorithms (Gradient2, Vegas,
// AIMD, or your own); package ratelimit the rate limiter's counting
// algorithms and stores (the in-memory one, or a shared one such as the
// Redis store in extensions/redis); package event the telemetry events the
// strategies emit and the event.Listener that receives them.
//
// # Pipelines
//
// A Pipeline[T] runs a callback that returns (T, error) through strategies,
// outermost first in the order they were added:
//
//	p, err := resilience.NewBuilder[int](resilience.WithName("inventory")).
//		AddConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 50}).
//		AddTimeout(resilience.TimeoutOptions{Timeout: 2 * time.Second}).
//		Build() // invalid options: an error naming the field
//	n, err := p.Execute(ctx, func(ctx context.Context) (int, error) { return queryInventory(ctx, sku) })
//
// Strategies are values that implement Strategy; the builder's AddX methods
// are shortcuts over them, and AddStrategy takes any value, including a
// custom strategy or a limiter shared by several pipelines. Strategies that
// only see the error (Strategy: timeout, limiters) are not generic, so one
// value serves pipelines of any T; those that see the callback's value
// (ResultStrategy[T]: retry, circuit breaker, fallback, hedging) are typed.
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
// Rejections are typed: *ConcurrencyLimitRejectedError (Reason full, queue-timeout
// or dropped), *TimeoutRejectedError, *RateLimitRejectedError. Each matches
// its sentinel (ErrConcurrencyLimitRejected, ErrTimeoutRejected,
// ErrRateLimitRejected) and ErrRejected with errors.Is. Invalid options are a
// *ConfigError (errors.Is ErrInvalidOptions) whose Field names the option.
//
// # Telemetry
//
// Strategies emit named events (event.Timeout, event.ConcurrencyLimiterRejected)
// labelled with the pipeline's and the strategy's names to the
// event.Listener set with WithListener. Package event, in this module,
// holds the events and their names; event.NewSlogListener logs them with
// log/slog.
//
// # User hooks
//
// Functions you supply run inside executions: a limiter's Priority, a rate
// limiter's Key, an adaptive limiter's Classifier and limit.Algorithm, and
// inbound's Options.Render. One rule covers them all: a hook's panic stays
// in the execution it belongs to, every limiter stays valid, and the panic
// is reported as event.HookPanic (Reason the hook's name, Err a
// *HookPanicError) wherever a Telemetry is at hand (Execute, a Pipeline,
// the inbound middleware).
//
//   - Priority, Key and Classifier run on their execution's own goroutine,
//     for it alone. Their panic is reported and then propagates, with its
//     value unchanged, to that execution's caller, after the limiter has
//     taken back what it held: no permit or queue place is lost. (Through
//     Acquire or Allow, which take no Telemetry, it only propagates.)
//   - limit.Algorithm.Update runs for everyone, on whichever execution
//     closes a sampling window. Its panic is recovered there, the previous
//     limit stands, and it is reported (AdaptivePermit.Release returns the
//     *HookPanicError for a caller outside Execute to report).
//   - inbound's Render is recovered too, since the 504 at the deadline is
//     rendered on a timer's goroutine: the default response is sent and
//     the panic is reported.
//
// # Fixed or adaptive concurrency limit
//
// ConcurrencyLimiter holds a limit you choose; AdaptiveLimiter finds one
// while the service runs (package limit: Gradient2 by default, or Vegas,
// AIMD, or your own limit.Algorithm), raising it while latency stays flat
// and lowering it as soon as latency climbs or executions time out. Both
// share one queue engine, so priorities, the overflow policies, queue
// timeouts and CoDel work the same; Stats reads the live limit, in-flight
// and queued counts of either.
//
// Prefer the fixed limit when you have measured one under load: it is
// simpler and fully predictable. Choose the adaptive one when the right
// limit is unknown or moves (instance sizes, traffic mix, a dependency's
// speed). Caveats:
//   - the algorithms compare latency with a baseline, so routes with very
//     different latencies belong in separate pipelines, each with its own
//     limiter;
//   - timeouts count as overload and lower the limit (a Classifier changes
//     that: the inbound middleware counts its own timeout as a drop and
//     ignores client errors and disconnects);
//   - latency the limit cannot fix (a slow dependency) lowers it too;
//     MinLimit is the floor that keeps work flowing meanwhile.
//
// # Standing queues: CoDel
//
// A queue absorbs bursts, but under sustained overload a full queue makes
// every admitted execution wait a whole queue's worth. CoDelOptions (on
// either limiter) shorten the queue timeout to a short Target while the
// queue has not been empty for an Interval, so bursts are still absorbed
// and a standing queue drains; AdaptiveLIFO serves the newest waiter first
// while it stands. Use it when the queue is sized as docs/guide.md suggests
// (one to two times the limit) and overload can last longer than a burst.
//
// # Outbound strategies
//
// Retry, CircuitBreaker, Fallback and Hedging protect a service from its
// dependencies. They see the callback's value as well as its error, so
// they are ResultStrategy[T] values (RetryOptions[T], …) added with
// AddRetry, AddCircuitBreaker, AddFallback, AddHedging or
// AddResultStrategy. Every predicate and generator receives an Outcome[T].
// They all run under the caller's context: a request that reached its inbound
// deadline also stops its retries, hedges and waits. WithSingleAttempt
// marks a context whose operation must not be repeated. They emit
// event.Retry, event.CircuitOpened, event.CircuitClosed,
// event.CircuitHalfOpened, event.Fallback, event.Hedging and, per attempt of
// a retry or hedging strategy, event.ExecutionAttempt with its duration.
// Package outbound, in this module, runs such a pipeline inside an
// http.RoundTripper; there the per-attempt timeout is
// outbound.Options.AttemptTimeout, since a Timeout strategy would also end
// the returned response's body.
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
