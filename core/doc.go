// Package resilience runs callbacks through pipelines of resilience
// strategies: timeout, concurrency limiter (fixed, with a priority queue,
// or adaptive), rate limiter, retry, circuit breaker, fallback and
// hedging:
//
//	p, err := resilience.NewBuilder[int](resilience.WithName("inventory")).
//		AddConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 50}).
//		AddTimeout(resilience.TimeoutOptions{Timeout: 2 * time.Second}).
//		Build()
//	n, err := p.Execute(ctx, func(ctx context.Context) (int, error) { return queryInventory(ctx, sku) })
//
// Most callers want three things:
//
//   - NewBuilder, its Add… methods and Build, for a Pipeline[T] whose
//     Execute runs a callback through the strategies, outermost first;
//   - each strategy's options (ConcurrencyLimiterOptions, TimeoutOptions,
//     RetryOptions[T], …): a zero field means its default, and Build
//     reports an invalid one as a *ConfigError naming it;
//   - the typed rejections, matched with errors.Is against ErrRejected or
//     a strategy's own sentinel (ErrConcurrencyLimitRejected, …).
//
// Strategies report to the event.Listener set with WithListener. Package
// inbound turns the limiters into HTTP load shedding, and package outbound
// runs a pipeline inside an http.RoundTripper. Packages limit, ratelimit,
// event, property and retryafter hold the adaptive limit's algorithms, the
// rate limiter's stores, the telemetry events, context properties and the
// Retry-After parsers; packages budget and throttle hold the client's
// retry budget and adaptive throttle.
//
// How to order, size and observe the strategies (composition, fixed or
// adaptive limit, CoDel, user hooks and their panics) is in the guide,
// https://github.com/ylcnfrht/resilience/blob/main/docs/guide.md#pipelines-in-code;
// what the project promises is in
// https://github.com/ylcnfrht/resilience/blob/main/docs/DESIGN.md.
package resilience
