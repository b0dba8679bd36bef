package outbound

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/property"
	"github.com/ylcnfrht/resilience/core/retryafter"
)

// Options configures a Transport. The zero Options is
// http.DefaultTransport with the retry of RetryOptions, repeating only
// requests that are safe to repeat.
type Options struct {
	// Base performs each attempt. nil means http.DefaultTransport.
	Base http.RoundTripper
	// Pipeline runs around each request. nil means a pipeline named
	// "outbound" with one retry strategy configured by RetryOptions().
	// Build it from RetryOptions, CircuitBreakerOptions, HedgingOptions
	// and FallbackOptions, which know how to read and release responses.
	//
	// It must not hold a Timeout strategy (New refuses one): a strategy's
	// context ends when the pipeline returns, which would also abort
	// reading the returned response's body. Bound each attempt with
	// AttemptTimeout and the whole request with its context (or
	// http.Client.Timeout).
	Pipeline *resilience.Pipeline[*http.Response]
	// AttemptTimeout bounds each attempt until its response headers
	// arrive; 0 means no bound. An attempt that runs out fails with a
	// *resilience.TimeoutRejectedError, which the predicates of
	// RetryOptions, CircuitBreakerOptions and HedgingOptions handle, so it
	// is retried, counted or hedged like any failed attempt. Reading the
	// returned body is bounded only by the request's context.
	AttemptTimeout time.Duration
	// RetryNonIdempotent lets retry and hedging repeat requests whose
	// method is not idempotent (POST, PATCH) and that carry no
	// Idempotency-Key header. Off by default: repeating a POST can charge
	// a card twice. A request whose body cannot be replayed is never
	// repeated, whatever this says.
	RetryNonIdempotent bool
}

// Transport is an http.RoundTripper that runs a resilience pipeline around
// each request: an http.Client built on it retries, breaks circuits and
// hedges without its callers doing anything. The request's context is the
// pipeline's, so its deadline and cancellation bound every attempt and
// every delay.
//
// Retries and hedges only repeat requests that are safe to repeat: an
// idempotent method (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or an
// Idempotency-Key header, unless Options.RetryNonIdempotent; and never a
// request with a body but no GetBody to replay it (http.NewRequest sets
// GetBody for in-memory bodies). Other requests run through the pipeline
// under property.WithSingleAttempt, so breakers still see them.
//
// Safe for concurrent use. The zero value is not usable; use New. A
// failed request leaves nothing behind: responses retried or hedged away,
// or replaced by a fallback, are drained and closed by the strategies'
// hooks in RetryOptions, HedgingOptions and FallbackOptions, and a request
// body that no attempt consumed is closed.
type Transport struct {
	base           http.RoundTripper
	pipeline       *resilience.Pipeline[*http.Response]
	anyMethodRetry bool
	attemptTimeout time.Duration
	attemptErr     *resilience.TimeoutRejectedError // shared: never modified
}

// ErrNoResponse is returned when the pipeline produced neither a response
// nor an error (a fallback whose value is a nil response).
var ErrNoResponse = errors.New("outbound: pipeline returned no response")

// ErrBodyNotReplayable is returned if a strategy repeats a request whose
// body cannot be replayed despite property.WithSingleAttempt (a custom
// strategy that ignores it).
var ErrBodyNotReplayable = errors.New("outbound: request body cannot be replayed")

// holdsTimeout reports whether p holds a Timeout strategy of its own.
func holdsTimeout(p *resilience.Pipeline[*http.Response]) bool {
	for _, s := range p.Strategies() {
		if _, ok := s.(*resilience.Timeout); ok {
			return true
		}
	}
	return false
}

// New returns a Transport, or a *resilience.ConfigError naming an invalid
// option.
func New(opts Options) (*Transport, error) {
	if opts.AttemptTimeout < 0 {
		return nil, &resilience.ConfigError{Field: "Options.AttemptTimeout", Problem: "must not be negative, got " + opts.AttemptTimeout.String()}
	}
	if opts.Pipeline != nil && holdsTimeout(opts.Pipeline) {
		return nil, &resilience.ConfigError{Field: "Options.Pipeline", Problem: "holds a Timeout strategy, whose end would also end reading the response body; bound each attempt with Options.AttemptTimeout and the whole request with its context"}
	}
	t := &Transport{base: opts.Base, pipeline: opts.Pipeline, anyMethodRetry: opts.RetryNonIdempotent,
		attemptTimeout: opts.AttemptTimeout, attemptErr: &resilience.TimeoutRejectedError{Timeout: opts.AttemptTimeout}}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	if t.pipeline == nil {
		p, err := resilience.NewBuilder[*http.Response](resilience.WithName("outbound")).
			AddRetry(RetryOptions()).
			Build()
		if err != nil {
			return nil, err
		}
		t.pipeline = p
	}
	return t, nil
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !t.repeatable(req) {
		ctx = property.WithSingleAttempt(ctx)
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	var attempts atomic.Int32
	resp, err := t.pipeline.Execute(ctx, func(actx context.Context) (*http.Response, error) {
		n := attempts.Add(1) - 1
		r := req.WithContext(actx) // a shallow copy: the caller's request is never modified
		if n > 0 && hasBody {
			if req.GetBody == nil {
				return nil, ErrBodyNotReplayable
			}
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = body
		}
		return t.attempt(r)
	})
	if attempts.Load() == 0 && hasBody {
		// No attempt took the body (an open circuit, a full bulkhead), but
		// a RoundTripper must close it whatever happens.
		req.Body.Close()
	}
	switch {
	case err != nil && resp != nil:
		// http.Client ignores a response that comes with an error; release it.
		DiscardResponse(resilience.Outcome[*http.Response]{Value: resp})
		return nil, err
	case err == nil && resp == nil:
		return nil, ErrNoResponse
	}
	return resp, err
}

// attempt sends r through the base transport, bounded by AttemptTimeout
// until the response headers arrive. The attempt's context then stays
// alive until the body is closed or read to the end, so the body stays
// readable after RoundTrip returns.
func (t *Transport) attempt(r *http.Request) (*http.Response, error) {
	if t.attemptTimeout <= 0 {
		return t.base.RoundTrip(r)
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	timer := time.AfterFunc(t.attemptTimeout, func() { cancel(t.attemptErr) })
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	fired := !timer.Stop()
	if err != nil || fired {
		if fired && context.Cause(ctx) == t.attemptErr {
			if resp != nil {
				DiscardResponse(resilience.Outcome[*http.Response]{Value: resp})
			}
			cancel(nil)
			return nil, t.attemptErr
		}
		cancel(nil)
		return resp, err
	}
	release := func() { cancel(nil) }
	return KeepResponse(resilience.Outcome[*http.Response]{Value: resp}, release).Value, nil
}

// repeatable reports whether req may be sent more than once.
func (t *Transport) repeatable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	if t.anyMethodRetry {
		return true
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	// The convention net/http itself follows: a key makes a POST safe to
	// repeat, since the server deduplicates it.
	_, hasKey := req.Header["Idempotency-Key"]
	_, hasXKey := req.Header["X-Idempotency-Key"]
	return hasKey || hasXKey
}

// HandledStatus reports whether a status code is a failure worth retrying
// or counting against a dependency: 408 Request Timeout, 429 Too Many
// Requests and every 5xx.
func HandledStatus(code int) bool {
	return code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout
}

// ShouldHandle is the predicate of RetryOptions, CircuitBreakerOptions and
// HedgingOptions: a transport error other than a cancellation, or a
// response whose status HandledStatus reports.
func ShouldHandle(o resilience.Outcome[*http.Response]) bool {
	if o.Err != nil {
		return !errors.Is(o.Err, context.Canceled)
	}
	return o.Value != nil && HandledStatus(o.Value.StatusCode)
}

// DelayGenerator honours a response's Retry-After header (seconds or an
// HTTP date), and otherwise a hint carried by the error
// (resilience.RetryAfterOf); without either the retry's backoff applies.
// MaxDelay still caps what it returns.
func DelayGenerator(_ context.Context, a resilience.RetryArgs[*http.Response]) (time.Duration, bool) {
	if r := a.Outcome.Value; r != nil {
		if v := r.Header.Get("Retry-After"); v != "" {
			return retryafter.Parse(v, time.Now())
		}
	}
	return resilience.RetryAfterOf(a.Outcome.Err)
}

// drainLimit bounds how much of a discarded body is read so the connection
// can be reused; past it, closing is cheaper than reading on.
const drainLimit = 64 << 10

// DiscardResponse drains (up to 64 KiB) and closes the body of a response
// that will not be returned, so its connection goes back to the pool.
func DiscardResponse(o resilience.Outcome[*http.Response]) {
	if r := o.Value; r != nil && r.Body != nil {
		io.CopyN(io.Discard, r.Body, drainLimit)
		r.Body.Close()
	}
}

// DefaultMaxRetryWait is the longest wait RetryOptions accepts before a
// retry: the backoff is capped at it, and a response (or error) asking to
// wait longer is not retried but returned as is, so one
// "Retry-After: 86400" cannot hold a request without a deadline for a day.
// The caller gets the response, Retry-After included, and can decide.
const DefaultMaxRetryWait = 30 * time.Second

// ShouldRetry returns the retry predicate of RetryOptions: ShouldHandle,
// except that an outcome whose Retry-After (or resilience.RetryAfterOf
// hint) asks for more than maxWait is not handled, so it is returned as is
// instead of waited for. maxWait <= 0 means no limit.
func ShouldRetry(maxWait time.Duration) func(o resilience.Outcome[*http.Response]) bool {
	return func(o resilience.Outcome[*http.Response]) bool {
		if !ShouldHandle(o) {
			return false
		}
		if maxWait <= 0 {
			return true
		}
		d, ok := DelayGenerator(context.Background(), resilience.RetryArgs[*http.Response]{Outcome: o})
		return !ok || d <= maxWait
	}
}

// RetryOptions returns retry options for HTTP: 3 retries with exponential
// backoff from 2 s and jitter, handling transport errors, 408, 429 and
// 5xx, waiting what Retry-After says up to DefaultMaxRetryWait (a longer
// Retry-After ends the retries and its response is returned), and
// releasing every response it retries away. Adjust the returned value
// before use; to accept longer waits set both MaxDelay and ShouldHandle
// (to ShouldRetry of the same duration).
func RetryOptions() resilience.RetryOptions[*http.Response] {
	return resilience.RetryOptions[*http.Response]{
		MaxRetryAttempts: 3,
		Delay:            2 * time.Second,
		BackoffType:      resilience.BackoffExponential,
		UseJitter:        true,
		MaxDelay:         DefaultMaxRetryWait,
		ShouldHandle:     ShouldRetry(DefaultMaxRetryWait),
		DelayGenerator:   DelayGenerator,
		OnRetry: func(_ context.Context, a resilience.RetryArgs[*http.Response]) {
			DiscardResponse(a.Outcome)
		},
	}
}

// CircuitBreakerOptions returns circuit breaker options for HTTP: the
// core defaults, counting transport errors, 408, 429 and 5xx as failures.
func CircuitBreakerOptions() resilience.CircuitBreakerOptions[*http.Response] {
	return resilience.CircuitBreakerOptions[*http.Response]{ShouldHandle: ShouldHandle}
}

// HedgingOptions returns hedging options for HTTP: one hedged attempt
// after 2 s, treating transport errors, 408, 429 and 5xx as unacceptable, releasing
// every response that is not returned, and keeping the returned
// response's attempt context alive until its body is closed or read to
// the end (KeepWinner), so the body stays readable after RoundTrip.
func HedgingOptions() resilience.HedgingOptions[*http.Response] {
	return resilience.HedgingOptions[*http.Response]{
		Delay:        2 * time.Second,
		ShouldHandle: ShouldHandle,
		OnDiscard:    DiscardResponse,
		KeepWinner:   KeepResponse,
	}
}

// KeepResponse is the KeepWinner of HedgingOptions: it wraps the body of
// the returned response so that closing it, or reading it to the end or to
// an error, calls release. With no body to read (an error, no response,
// http.NoBody) it calls release at once.
func KeepResponse(o resilience.Outcome[*http.Response], release func()) resilience.Outcome[*http.Response] {
	r := o.Value
	if o.Err != nil || r == nil || r.Body == nil || r.Body == http.NoBody {
		release()
		return o
	}
	rb := releaseBody{rc: r.Body, release: release}
	if w, ok := r.Body.(io.Writer); ok {
		// A 101 Switching Protocols body is also the connection's writer.
		r.Body = &releaseReadWriteBody{releaseBody: rb, w: w}
	} else {
		r.Body = &rb
	}
	return o
}

// releaseBody calls release once its body is done with.
type releaseBody struct {
	rc      io.ReadCloser
	release func() // a context.CancelFunc: idempotent
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		b.release()
	}
	return n, err
}

func (b *releaseBody) Close() error {
	err := b.rc.Close()
	b.release()
	return err
}

type releaseReadWriteBody struct {
	releaseBody
	w io.Writer
}

func (b *releaseReadWriteBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// FallbackOptions returns fallback options for HTTP: transport errors,
// 408, 429 and 5xx are answered by action, and the response it replaces
// is drained and closed before action runs (action may still read its
// status and headers, not its body). A nil action answers with no
// response, which Transport reports as ErrNoResponse.
func FallbackOptions(action func(ctx context.Context, o resilience.Outcome[*http.Response]) (*http.Response, error)) resilience.FallbackOptions[*http.Response] {
	return resilience.FallbackOptions[*http.Response]{
		ShouldHandle: ShouldHandle,
		FallbackAction: func(ctx context.Context, o resilience.Outcome[*http.Response]) (*http.Response, error) {
			DiscardResponse(o)
			if action == nil {
				return nil, nil
			}
			return action(ctx, o)
		},
	}
}
