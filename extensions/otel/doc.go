// Package resilienceotel exports the telemetry of resilience pipelines and
// the inbound middleware as OpenTelemetry metrics, so operators see
// shedding, timeouts and limits in any OpenTelemetry backend (Prometheus
// through the OpenTelemetry Prometheus exporter, OTLP, …).
//
// Make one Metrics per process with New and pass it as the listener of
// pipelines (resilience.WithListener) and middlewares
// (inbound.Options.Listener); put ExecutionTimer first in a pipeline to
// time executions; register limiters for the gauges with ObserveLimiter or
// ObserveMiddleware.
//
// # Instruments
//
// Names follow OpenTelemetry's semantic-convention style under the
// resilience. prefix (the Prometheus exporter turns dots into underscores
// and adds unit and _total suffixes: resilience_events_total,
// resilience_execution_duration_seconds, …).
//
//	name                           kind                     unit         attributes
//	resilience.events              Counter                  {event}      event.name, pipeline.name, strategy.name, outcome, reason (when set)
//	resilience.execution.duration  Histogram                s            pipeline.name, outcome, error.type (unless ok)
//	resilience.attempt.duration    Histogram                s            pipeline.name, strategy.name, attempt.handled, outcome, error.type (unless ok)
//	resilience.queue.wait          Histogram                s            pipeline.name, strategy.name, reason (admitted, queue-timeout, dropped)
//	resilience.requests            ObservableCounter        {request}    limiter.name, request.result (middlewares only)
//	resilience.limiter.limit       ObservableGauge          {permit}     limiter.name
//	resilience.limiter.in_flight   ObservableUpDownCounter  {execution}  limiter.name
//	resilience.limiter.queued      ObservableUpDownCounter  {execution}  limiter.name
//	resilience.limiter.late        ObservableUpDownCounter  {execution}  limiter.name (middlewares only)
//	resilience.limiter.min_limit   ObservableGauge          {permit}     limiter.name (ObserveAlgorithm)
//	resilience.limiter.max_limit   ObservableGauge          {permit}     limiter.name (ObserveAlgorithm)
//	resilience.limiter.rtt         ObservableGauge          s            limiter.name (ObserveAlgorithm)
//	resilience.limiter.min_rtt     ObservableGauge          s            limiter.name (ObserveAlgorithm)
//	resilience.circuit.state       ObservableGauge          -            circuit.name, circuit.state (ObserveCircuit)
//
// Every attribute key carries the resilience. prefix
// (resilience.event.name, …). The event name is the string value of the
// event's event.Name (OnConcurrencyLimiterRejected for
// event.ConcurrencyLimiterRejected, OnExecutionAttempt for
// event.ExecutionAttempt, …); the reasons are those the events carry.
// resilience.events counts every event: concurrency limiter rejections
// (event OnConcurrencyLimiterRejected, reason full, queue-timeout, dropped
// or shutting-down), rate limiter rejections (OnRateLimiterRejected,
// reason rate-limited), admissions after queueing
// (OnQueueAdmitted), timeouts, store errors (reason fail-open or
// fail-closed), retries, circuit transitions, fallbacks, hedges, attempts
// (reason handled or unhandled) and contained panics of user hooks (reason
// the hook's name). Outcome classifies the event's error: ok, rejected,
// timeout, canceled or error. Execution durations come from
// ExecutionTimer, attempt durations from OnExecutionAttempt events, and
// queue waits from OnQueueAdmitted events (reason admitted) and from
// concurrency limiter rejections after queueing (reason queue-timeout or
// dropped). Executions admitted at
// once did not queue and are not measured, nor are waits that the caller's
// own context or a shutdown ended.
//
// resilience.requests counts an inbound middleware's requests
// (ObserveMiddleware) by resilience.request.result: admitted (its handler
// answered), timeout (its deadline answered, 504), rate-limited, full,
// queue-timeout, dropped, shutting-down, canceled and panicked (its
// handler panicked before its deadline answered it). Every request has
// one result, so the results add up to all requests, and each one divided
// by their sum is a share with the right denominator (rate-limited
// requests included). It is read from inbound.Stats at each collection,
// so counting costs the request path one atomic add.
//
// The outcome of an execution is the client's: a request the middleware
// answered 504 at its deadline records resilience.outcome timeout in
// resilience.execution.duration, also when its handler (ignoring its
// context) returns normally later; its duration is then the handler's,
// late part included.
//
// Queue waits use DefaultQueueWaitBuckets, with bounds at each common
// queue timeout and 5 % above it (a wait ended by a queue timeout lasts a
// little more than the timeout; between round bounds its p99 would read
// up to 2.5 × too high). Options.QueueWaitBuckets with
// QueueWaitBuckets(timeout) lays them around one queue timeout instead.
//
// Limiter gauges are read at each collection from the registered
// limiters: the current limit (an adaptive limiter's moves), the
// executions holding a permit, those queued, and, for a middleware, the
// handlers still running after their deadline was answered. The limit is
// an ObservableGauge (limits of two limiters do not add up); the three
// counts of executions are asynchronous UpDownCounters, as OpenTelemetry's
// conventions have for active requests, since they do add up across
// limiters and instances. Prometheus shows all four as gauges.
//
// ObserveAlgorithm wraps an adaptive limiter's algorithm to report its
// configured bounds (resilience.limiter.min_limit and max_limit, so a rule
// can compare the limit with its floor without knowing it) and the
// round-trip times it decides on (resilience.limiter.rtt and min_rtt, of
// the last sampling window), as Netflix's and Envoy's adaptive limiters
// export theirs. ObserveCircuit reports a circuit breaker's state as a
// state set: resilience.circuit.state is 1 for the current state
// (closed, open, half-open or isolated) and 0 for the others.
//
// # Semantic conventions
//
// Units are UCUM as OpenTelemetry's conventions ask: s for durations,
// annotations in braces for counts ({request}, {event}, {execution},
// {permit}); the circuit state set has none. The duration histograms carry
// error.type, the conventions' attribute for an operation that failed,
// with the outcome as its value (timeout, rejected, canceled, error; absent
// for ok). The conventions define no attributes for pipelines, strategies,
// limiters, shedding reasons or circuit breakers, so those keep this
// package's resilience. namespace (resilience.request.result rather than
// http.response.status_code: a 503 here has four different causes).
//
// # Cardinality
//
// Attributes are bounded: names of pipelines, strategies and limiters come
// from configuration (cut to 64 bytes); event names and reasons other than
// core's become "other"; errors are reduced to five outcomes. No key,
// path, client address or error text ever becomes an attribute.
package resilienceotel
