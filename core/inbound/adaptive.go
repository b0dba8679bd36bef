package inbound

import (
	"bufio"
	"net"
	"net/http"

	resilience "github.com/ylcnfrht/resilience/core"
)

// validateAdaptive rejects the combinations that would put two limiters
// in the concurrency stage.
func (o *Options) validateAdaptive() error {
	if o.Adaptive == nil {
		return nil
	}
	if o.Concurrency != nil {
		return configError("Options.Adaptive", "cannot be set together with Options.Concurrency; choose one limiter")
	}
	if o.Pipeline != nil {
		return configError("Options.Adaptive", "cannot be set together with Options.Pipeline; put the adaptive limiter in the pipeline")
	}
	return nil
}

// AdaptiveLimiter returns the limiter built from Options.Adaptive (its
// Stats reads the live limit for dashboards and health checks), or nil.
func (m *Middleware) AdaptiveLimiter() *resilience.AdaptiveLimiter { return m.adaptive }

// result is how a net/http request under the adaptive limiter ended,
// filled in by whichever writer it ran with.
type result struct {
	completed  bool        // the handler returned (false: it panicked)
	state      writerState // the writer's state when it returned
	status     int         // the response status; 0 if none was written
	clientGone bool        // the request's own context ended, not by time
}

// outcome is the inbound classification: a request that hit the timeout
// signals overload; a client that left is abandoned (the limiter counts it
// as overload only if the client had waited longer than it expects); a
// panic, a hijacked connection (its duration is the connection's, not the
// service's) and a client error (4xx: the request was wrong, however fast)
// say nothing about capacity; anything else is a latency sample, failures
// included.
func (r *result) outcome() resilience.LimitOutcome {
	switch {
	case !r.completed:
		return resilience.LimitIgnored
	case r.state == stateTimedOut || r.state == stateAborted:
		return resilience.LimitDropped
	case r.clientGone:
		return resilience.LimitAbandoned
	case r.state == stateHijacked, r.status >= 400 && r.status < 500:
		return resilience.LimitIgnored
	}
	return resilience.LimitSampled
}

// statusWriter records the response status for the adaptive limiter when
// no timeout is configured (the timed writer records it otherwise). It
// passes everything through: Flush and Hijack as the interfaces handlers
// assert, and the rest (deadlines, full duplex) through Unwrap and
// http.ResponseController. It is used by the handler's goroutine only;
// after Hijack it records nothing more.
type statusWriter struct {
	w        http.ResponseWriter
	status   int
	hijacked bool
}

func (sw *statusWriter) Header() http.Header { return sw.w.Header() }

// WriteHeader records the first final status; 1xx responses are
// informational and do not count.
func (sw *statusWriter) WriteHeader(code int) {
	if sw.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		sw.status = code
	}
	sw.w.WriteHeader(code)
}

// Write records the implicit 200 of a response without WriteHeader.
func (sw *statusWriter) Write(p []byte) (int, error) {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	return sw.w.Write(p)
}

// FlushError flushes the underlying writer; flushing commits an implicit
// 200.
func (sw *statusWriter) FlushError() error {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	return flushUnderlying(sw.w)
}

// Flush implements http.Flusher.
func (sw *statusWriter) Flush() { _ = sw.FlushError() }

// Hijack hands the connection to the handler; the request is then not
// counted by the limiter.
func (sw *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(sw.w).Hijack()
	if err == nil {
		sw.hijacked = true
	}
	return conn, rw, err
}

// Unwrap gives http.ResponseController the underlying writer.
func (sw *statusWriter) Unwrap() http.ResponseWriter { return sw.w }
