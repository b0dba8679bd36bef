package outbound

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/budget"
	"github.com/ylcnfrht/resilience/core/property"
	"github.com/ylcnfrht/resilience/core/retryafter"
	"github.com/ylcnfrht/resilience/core/throttle"
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
	// Budget and Throttle configure the default pipeline (Pipeline nil):
	// its retry draws on Budget, and Throttle, inside the retry, sees and
	// throttles every attempt. Share one Budget and one Throttle between
	// the transports that call the same dependency. With a Pipeline of
	// your own, set RetryOptions.Budget and add the throttle to it
	// instead: New refuses both at once.
	Budget   *budget.Budget
	Throttle *throttle.Throttle[*http.Response]
}

// AttemptHeader marks a request sent again by a retry or a hedge: its
// value is the attempt's number, 1 for the first retry or hedge. First
// attempts do not carry it. A gRPC or Connect request (a Content-Type of
// application/grpc… or a Connect-Protocol-Version header) also carries
// the same number as grpc-previous-rpc-attempts, as gRPC's own retries
// send it. A server can shed marked requests first: see
// by.RetriesLast.
const AttemptHeader = "Retry-Attempt"

// grpcAttemptsHeader is gRPC's count of the attempts before this one.
const grpcAttemptsHeader = "Grpc-Previous-Rpc-Attempts"

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
// Every retry and hedge is marked with AttemptHeader (and
// grpc-previous-rpc-attempts for gRPC and Connect), so that the server can
// tell fresh work from repeated work.
//
// Safe for concurrent use. The zero value is not usable; use New. A
// failed request leaves nothing behind: responses retried or hedged away,
// or replaced by a fallback, are drained and closed by the strategies'
// hooks in RetryOptions, HedgingOptions and FallbackOptions, and a request
// body that no attempt consumed is closed.
type Transport struct {
	// cfg is the configuration in force, replaced whole by Reconfigure; a
	// request reads it once, so it runs wholly under one configuration.
	cfg atomic.Pointer[transportConfig]
}

// transportConfig is what a Transport runs a request with.
type transportConfig struct {
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
	c, err := build(opts)
	if err != nil {
		return nil, err
	}
	t := &Transport{}
	t.cfg.Store(c)
	return t, nil
}

// build validates opts and makes the configuration a request runs with.
func build(opts Options) (*transportConfig, error) {
	if opts.AttemptTimeout < 0 {
		return nil, &resilience.ConfigError{Field: "Options.AttemptTimeout", Problem: "must not be negative, got " + opts.AttemptTimeout.String()}
	}
	if opts.Pipeline != nil && (opts.Budget != nil || opts.Throttle != nil) {
		field := "Options.Budget"
		if opts.Budget == nil {
			field = "Options.Throttle"
		}
		return nil, &resilience.ConfigError{Field: field, Problem: "configures the default pipeline only; with Options.Pipeline set RetryOptions.Budget and add the throttle to that pipeline"}
	}
	if opts.Pipeline != nil && holdsTimeout(opts.Pipeline) {
		return nil, &resilience.ConfigError{Field: "Options.Pipeline", Problem: "holds a Timeout strategy, whose end would also end reading the response body; bound each attempt with Options.AttemptTimeout and the whole request with its context"}
	}
	t := &transportConfig{base: opts.Base, pipeline: opts.Pipeline, anyMethodRetry: opts.RetryNonIdempotent,
		attemptTimeout: opts.AttemptTimeout, attemptErr: &resilience.TimeoutRejectedError{Timeout: opts.AttemptTimeout}}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	if t.pipeline == nil {
		ro := RetryOptions()
		ro.Budget = opts.Budget
		b := resilience.NewBuilder[*http.Response](resilience.WithName("outbound")).AddRetry(ro)
		if opts.Throttle != nil {
			b.AddResultStrategy(opts.Throttle)
		}
		p, err := b.Build()
		if err != nil {
			return nil, err
		}
		t.pipeline = p
	}
	return t, nil
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.cfg.Load()
	ctx := req.Context()
	if !c.repeatable(req) {
		ctx = property.WithSingleAttempt(ctx)
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	var attempts atomic.Int32
	resp, err := c.pipeline.Execute(ctx, func(actx context.Context) (*http.Response, error) {
		n := attempts.Add(1) - 1
		r := req.WithContext(actx) // a shallow copy: the caller's request is never modified
		if n > 0 {
			markAttempt(r, int(n))
		}
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
		resp, err := c.attempt(r)
		if err == nil {
			settleGRPCStatus(resp)
		}
		return resp, err
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

// markAttempt sets the retry marks on r, a copy of the caller's request,
// on a copy of its header.
func markAttempt(r *http.Request, n int) {
	h := r.Header.Clone()
	if h == nil {
		h = make(http.Header, 2)
	}
	v := strconv.Itoa(n)
	h.Set(AttemptHeader, v)
	if _, connect := h["Connect-Protocol-Version"]; connect || strings.HasPrefix(h.Get("Content-Type"), "application/grpc") {
		h.Set(grpcAttemptsHeader, v)
	}
	r.Header = h
}

// attempt sends r through the base transport, bounded by AttemptTimeout
// until the response headers arrive. The attempt's context then stays
// alive until the body is closed or read to the end, so the body stays
// readable after RoundTrip returns.
func (t *transportConfig) attempt(r *http.Request) (*http.Response, error) {
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
func (t *transportConfig) repeatable(req *http.Request) bool {
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
// HedgingOptions: a transport error other than a cancellation or a local
// throttling (throttle.ErrThrottled: nothing was sent, and trying again
// at once would only be throttled again), a response whose status
// HandledStatus reports, or a gRPC response without messages (an error
// answered before any message: trailers-only, or an empty body and
// trailers, which Transport reads before deciding) whose grpc-status is
// UNAVAILABLE or RESOURCE_EXHAUSTED. A gRPC error in the trailers after a
// message is not seen here: the response has been returned by then.
func ShouldHandle(o resilience.Outcome[*http.Response]) bool {
	if o.Err != nil {
		return !errors.Is(o.Err, context.Canceled) && !errors.Is(o.Err, throttle.ErrThrottled)
	}
	if o.Value == nil {
		return false
	}
	if HandledStatus(o.Value.StatusCode) {
		return true
	}
	code, ok := grpcStatus(o.Value)
	return ok && (code == grpcUnavailable || code == grpcResourceExhausted)
}

// gRPC status codes the predicates read.
const (
	grpcDeadlineExceeded  = 4
	grpcResourceExhausted = 8
	grpcUnavailable       = 14
)

// grpcStatus returns the grpc-status of a gRPC response without messages:
// in its headers (trailers-only) or, once settleGRPCStatus has read its
// empty body, in its trailers.
func grpcStatus(r *http.Response) (int, bool) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		return 0, false
	}
	v := r.Header.Get("Grpc-Status")
	if v == "" && r.Trailer != nil {
		v = r.Trailer.Get("Grpc-Status")
	}
	if v == "" {
		return 0, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(v))
	return code, err == nil
}

// settleGRPCStatus reads the empty body of a gRPC response that has no
// message (Content-Length 0) and announces trailers, so that its status
// and pushback, which arrive in the trailers, are known before the
// retry decides. The caller still reads the body (at its end) and the
// trailers as usual.
func settleGRPCStatus(r *http.Response) {
	if r == nil || r.ContentLength != 0 || len(r.Trailer) == 0 || r.Body == nil || r.Body == http.NoBody ||
		r.Header.Get("Grpc-Status") != "" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		return
	}
	io.Copy(io.Discard, io.LimitReader(r.Body, 1)) //nolint:errcheck // an error leaves the status unknown, as before
}

// DelayGenerator honours the server's pushback: a response's Retry-After
// header (seconds or an HTTP date), else the grpc-retry-pushback-ms of a
// gRPC response without messages (in its headers or trailers), else, on a 429 or 503 whose rate limit has no
// quota left (RateLimit-Remaining 0, or r=0 in a RateLimit header), when
// it resets (RateLimit-Reset seconds, or the t parameter), and otherwise a hint carried by the error
// (retryafter.Of); without any the retry's backoff applies.
// MaxDelay still caps what it returns.
func DelayGenerator(_ context.Context, a resilience.RetryArgs[*http.Response]) (time.Duration, bool) {
	if r := a.Outcome.Value; r != nil {
		if d, ok, _ := Pushback(r); ok {
			return d, true
		}
	}
	return retryafter.Of(a.Outcome.Err)
}

// Pushback returns the wait a response asks for before another attempt,
// from the headers DelayGenerator reads. stop reports a gRPC pushback
// that is malformed or negative, which gRPC defines as "do not retry";
// ShouldRetry then returns the response as is.
func Pushback(r *http.Response) (d time.Duration, ok, stop bool) {
	h := r.Header
	if v := h.Get("Retry-After"); v != "" {
		d, ok = retryafter.Parse(v, time.Now())
		return d, ok, false
	}
	if v, has := h["Grpc-Retry-Pushback-Ms"]; has && len(v) > 0 {
		d, ok = retryafter.ParsePushback(v[0])
		return d, ok, !ok
	}
	if v := r.Trailer.Get("Grpc-Retry-Pushback-Ms"); v != "" {
		d, ok = retryafter.ParsePushback(v)
		return d, ok, !ok
	}
	if r.StatusCode != http.StatusTooManyRequests && r.StatusCode != http.StatusServiceUnavailable {
		return 0, false, false
	}
	// A rate limit's reset is pushback only when its quota is spent: a
	// server that also sheds for other reasons sends the fields on every
	// response.
	if h.Get("RateLimit-Remaining") == "0" {
		if secs, err := strconv.ParseUint(strings.TrimSpace(h.Get("RateLimit-Reset")), 10, 32); err == nil {
			return time.Duration(secs) * time.Second, true, false
		}
	}
	if v := h.Get("RateLimit"); v != "" {
		// The structured form: "policy";r=0;t=5, r the quota left and t
		// the seconds until it resets.
		var left, reset string
		for _, p := range strings.Split(v, ";") {
			if k, val, found := strings.Cut(strings.TrimSpace(p), "="); found {
				switch k {
				case "r":
					left = strings.TrimSpace(val)
				case "t":
					reset = strings.TrimSpace(val)
				}
			}
		}
		if left == "0" {
			if secs, err := strconv.ParseUint(reset, 10, 32); err == nil {
				return time.Duration(secs) * time.Second, true, false
			}
		}
	}
	return 0, false, false
}

// Refused is the IsRejected of ThrottleOptions: whether the dependency
// refused a request rather than answered it. A 429, 502, 503 or 504
// response, a gRPC trailers-only UNAVAILABLE, RESOURCE_EXHAUSTED or
// DEADLINE_EXCEEDED, a timeout and a transport error refuse; a
// cancellation, the throttle's own rejection and every other status (4xx
// and 500 included: the server did the work) do not.
func Refused(o resilience.Outcome[*http.Response]) bool {
	if o.Err != nil {
		return !errors.Is(o.Err, context.Canceled) && !errors.Is(o.Err, throttle.ErrThrottled)
	}
	if o.Value == nil {
		return false
	}
	switch o.Value.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	code, ok := grpcStatus(o.Value)
	return ok && (code == grpcUnavailable || code == grpcResourceExhausted || code == grpcDeadlineExceeded)
}

// ThrottleOptions returns adaptive throttle options for HTTP: the core
// defaults (K 2 over 10 s, at least one request a second), with Refused
// deciding what the dependency refused. Add the throttle after the retry
// so that it sees every attempt (or give it to Options.Throttle).
func ThrottleOptions() throttle.Options[*http.Response] {
	return throttle.Options[*http.Response]{IsRejected: Refused}
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
// except that an outcome whose Retry-After (or retryafter.Of
// hint) asks for more than maxWait is not handled, so it is returned as is
// instead of waited for. maxWait <= 0 means no limit.
func ShouldRetry(maxWait time.Duration) func(o resilience.Outcome[*http.Response]) bool {
	return func(o resilience.Outcome[*http.Response]) bool {
		if !ShouldHandle(o) {
			return false
		}
		if r := o.Value; r != nil {
			if _, _, stop := Pushback(r); stop {
				return false
			}
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
