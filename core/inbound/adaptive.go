package inbound

import (
	"bufio"
	"context"
	"errors"
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

// initAdaptive builds the adaptive limiter of Options.Adaptive, if set.
func (m *Middleware) initAdaptive(name string) error {
	a := m.opts.Adaptive
	if a == nil {
		return nil
	}
	l, err := resilience.NewAdaptiveLimiter(*a)
	if err != nil {
		return err
	}
	m.adaptive = l
	m.limTel = resilience.NewTelemetry(name, l.StrategyName(), m.opts.Listener)
	m.needView = a.Priority != nil
	return nil
}

// AdaptiveLimiter returns the limiter built from Options.Adaptive (its
// Stats is a resilience.LimitProvider for dashboards and health checks),
// or nil.
func (m *Middleware) AdaptiveLimiter() *resilience.AdaptiveLimiter { return m.adaptive }

// acquireAdaptive takes an adaptive permit, emitting the limiter's
// rejections as acquire does for the fixed limiter.
func (m *Middleware) acquireAdaptive(ctx context.Context) (resilience.AdaptivePermit, error) {
	p, err := m.adaptive.Acquire(ctx)
	if err != nil && m.limTel.Enabled() && ctx.Err() == nil {
		var b *resilience.BulkheadRejectedError
		if errors.As(err, &b) {
			m.limTel.Emit(ctx, resilience.Event{Name: resilience.EventRateLimiterRejected, Reason: string(b.Reason), Err: err})
		}
	}
	return p, err
}

// timedResult is how a request under the adaptive limiter ended, filled
// in by whichever writer it ran with.
type timedResult struct {
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
func (r *timedResult) outcome() resilience.LimitOutcome {
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

// serveAdaptive runs next under the adaptive limiter and releases the
// permit, classified, when next really returns (or panics).
func (m *Middleware) serveAdaptive(w http.ResponseWriter, r *http.Request, ctx context.Context, next http.Handler) {
	p, err := m.acquireAdaptive(ctx)
	if err != nil {
		m.reject(w, err)
		return
	}
	var res timedResult // stays zero (ignored) if next panics
	defer func() { p.Release(res.outcome()) }()
	if m.timeout > 0 {
		m.serveTimed(w, r, ctx, next, false, &res)
		return
	}
	sw := &statusWriter{w: w}
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	next.ServeHTTP(sw, r)
	res = timedResult{completed: true, state: stateCommitted, status: sw.status}
	if sw.hijacked {
		res.state = stateHijacked
	}
	if client := r.Context(); client.Err() != nil {
		if isTimeout(context.Cause(client)) {
			res.state = stateTimedOut // an upstream deadline: time ran out
		} else {
			res.clientGone = true
		}
	}
}

// executeAdaptive is Execute's limiter stage with the adaptive limiter.
// Without a response to look at, fn's error decides, through
// AdaptiveLimiterOptions.Classify or resilience.DefaultClassify: the
// inbound timeout's *resilience.TimeoutRejectedError is a drop, the
// request's context cancelled (the client left) is ignored.
func (m *Middleware) executeAdaptive(ctx context.Context, fn func(ctx context.Context) error) error {
	p, err := m.acquireAdaptive(ctx)
	if err != nil {
		return err
	}
	outcome := resilience.LimitIgnored // if fn panics
	defer func() { p.Release(outcome) }()
	err = m.runTimeout(ctx, fn)
	classify := m.opts.Adaptive.Classify
	if classify == nil {
		classify = resilience.DefaultClassify
	}
	outcome = classify(ctx, err)
	return err
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
