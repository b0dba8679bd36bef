// Package resilienceotel exports what resilience pipelines and the inbound
// middleware do as OpenTelemetry metrics. Operators then see shedding,
// timeouts, queue waits and limits in any OpenTelemetry backend
// (Prometheus through its exporter, OTLP, …).
//
// Most callers want New and ObserveMiddleware. Make one Metrics per
// process with New and give it to the middleware as
// inbound.Options.Listener, for its events. Register the middleware with
// ObserveMiddleware, for its gauges and its requests by result. A
// pipeline takes the Metrics with resilience.WithListener, and
// ExecutionTimer as its first strategy to time executions.
// ObserveLimiter, ObserveAlgorithm and ObserveCircuit report a limiter,
// an adaptive limiter's algorithm and a circuit breaker.
//
// # Instruments
//
// Names and attribute keys all start with "resilience."; the attributes
// below leave it out. error.type is OpenTelemetry's own key. The
// module's README says what each instrument measures, lists the request
// results and says how Prometheus names them.
//
//	name                           kind                     unit         attributes
//	resilience.events              Counter                  {event}      event.name, pipeline.name, strategy.name, outcome, reason (when set)
//	resilience.execution.duration  Histogram                s            pipeline.name, outcome, error.type (unless ok)
//	resilience.attempt.duration    Histogram                s            pipeline.name, strategy.name, attempt.handled, outcome, error.type (unless ok)
//	resilience.queue.wait          Histogram                s            pipeline.name, strategy.name, reason (admitted, queue-timeout, dropped)
//	resilience.requests            ObservableCounter        {request}    limiter.name, request.result (middlewares only)
//	resilience.requests.shadow     ObservableCounter        {request}    limiter.name, request.result (inbound.Options.Shadow's decisions, once there is one)
//	resilience.reloads             Counter                  {reload}     pipeline.name, reload.result (ok, failed: Middleware.Reconfigure)
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
// Attributes are bounded: names come from configuration (cut to 64
// bytes), event names and reasons core does not emit become "other", and
// errors become one of five outcomes. No key, flow, path, client address
// or error text ever becomes an attribute.
package resilienceotel
