// Package outbound puts resilience pipelines on the client side of
// net/http: Transport is an http.RoundTripper that runs a
// *resilience.Pipeline[*http.Response] around every request.
//
//	cb, _ := resilience.NewCircuitBreaker(outbound.CircuitBreakerOptions())
//	p, _ := resilience.NewBuilder[*http.Response](resilience.WithName("payments")).
//		AddRetry(outbound.RetryOptions()).
//		AddResultStrategy(cb).
//		Build()
//	t, _ := outbound.New(outbound.Options{Pipeline: p})
//	client := &http.Client{Transport: t}
//
// Status codes become outcomes: a 5xx, 429 or 408 response is handled (a
// failure to retry, or to count against the circuit), and when retries run
// out it is returned as is, like any response. Retry-After is honoured up
// to DefaultMaxRetryWait; a response asking for a longer wait is returned
// as is instead of waited for. Only requests that are safe to repeat are
// retried or hedged: idempotent methods, or an Idempotency-Key header, and
// never a body that cannot be replayed. Options.AttemptTimeout bounds each
// attempt; the request's context bounds everything, so a request made while
// handling an inbound request stops at that request's deadline.
//
// Against retry storms: Options.Budget caps the retries across requests
// (budget.Budget), Options.Throttle refuses requests locally while
// the dependency refuses most of them (throttle.Throttle with
// ThrottleOptions), and every retry and hedge carries AttemptHeader, so a
// server can shed repeated work first (by.RetriesLast, in core/inbound/by).
package outbound
