package inbound

import (
	"fmt"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// Options configures the inbound pipeline of a Middleware: rate limit →
// concurrency limiter (or a custom Pipeline) → timeout. Every stage is
// optional; the zero Options makes a middleware that only passes requests
// through. Options are copied by New; changing them afterwards has no
// effect, and New reports an invalid field as a *resilience.ConfigError
// without building anything. The functions in it (keys, priorities,
// classifiers, Render, LimiterStats) are called concurrently by requests
// and must be safe for that. A panic in one of them is reported as
// event.HookPanic and its request still gets an ordinary answer, on every
// adapter: a Priority that panics ranks the request last, a Key counts it
// against PanickedKey, a Classifier's request is ignored by the adaptive
// limit, and a Render's gets the default response. (A custom Pipeline's
// hooks follow core's rule instead: reported, then propagated.)
type Options struct {
	// Name labels the telemetry events of the inbound stages (the
	// pipeline name). Default "inbound".
	Name string

	// Timeout is the request's time budget; 0 means no timeout. At the
	// deadline the request's context is cancelled and, if
	// the handler has not started its response, a complete 504 is sent at
	// once, whether or not the handler watches its context.
	// By default it is the request's whole budget, counted from arrival
	// (TimeoutFrom): keep it below the timeout of whoever calls you, so
	// your 504 arrives before they give up.
	Timeout time.Duration

	// Concurrency, when set, caps the handlers running at once, with a
	// short priority queue (see resilience.ConcurrencyLimiterOptions).
	// Full queue and queue timeout are 503s. Its Cost function, if
	// set, is called once per request with the request view, and the
	// request holds that many permits (docs/guide.md, "Requests that
	// cost more"). Mutually exclusive with Pipeline.
	Concurrency *resilience.ConcurrencyLimiterOptions

	// Adaptive, when set, is the concurrency limiter stage instead of
	// Concurrency: a resilience.AdaptiveLimiter whose limit follows the
	// service's latency. Each request counts by its outcome: one that hit
	// Timeout is a drop (overload), a client that left is
	// resilience.LimitAbandoned (overload only if it had waited longer
	// than the limiter expects), a 4xx response, a hijacked connection or
	// a panic are ignored, anything else is a latency sample. Mutually
	// exclusive with Concurrency and Pipeline.
	Adaptive *resilience.AdaptiveLimiterOptions

	// RateLimit, when set, limits requests per key before they reach the
	// concurrency limiter; refusals are 429s. As everywhere, a nil Key
	// means one limit shared by every request: set Key to by.ClientIP
	// for a limit per client. Its Cost function, if set, takes that
	// many tokens per request, with the request view like Key.
	RateLimit *resilience.RateLimiterOptions

	// Pipeline, when set, replaces the concurrency limiter stage with a
	// pipeline of the caller's own (an adaptive limiter, a shared limiter,
	// several stages). Its strategies, and the handler under it, see the
	// request view through RequestFrom. A timeout strategy inside it also
	// produces a 504 at its deadline. Its rejections render like the built-in ones; a rejection
	// of another kind is a 503 REJECTED, any other error a 500 INTERNAL
	// without the error's text. Mutually exclusive with Concurrency.
	Pipeline *resilience.Pipeline[struct{}]

	// LimiterStats, when set, supplies Limit, InFlight and Queued for
	// Stats: with a custom Pipeline, pass the Stats method of the limiter
	// in it. Ignored when Concurrency or Adaptive is set.
	LimiterStats func() resilience.LimiterStats

	// Listener receives the telemetry events of the built-in stages, the
	// events core's strategies emit, with the same fields, whichever entry
	// point: event.RateLimiterRejected for 429s,
	// event.ConcurrencyLimiterRejected for 503s (with the time queued),
	// event.QueueAdmitted for requests that got a slot after
	// queueing, event.RateLimiterStoreError, and event.Timeout when Timeout
	// ends a handler (not when an earlier deadline of the caller's does). A
	// custom Pipeline reports to its own listener.
	Listener event.Listener

	// ClientIP says how the client address is found (trusted proxies,
	// IPv6 grouping). The default uses the connection's peer.
	ClientIP ClientIPOptions

	// RateLimitHeaders chooses the RateLimit header fields of a
	// rate-limited route; "" means RateLimitHeadersSplit. It accepts what
	// core's Parse functions accept (case, surrounding space and '_'
	// for '-' ignored); New reports any other value.
	RateLimitHeaders RateLimitHeaderStyle

	// TimeoutFrom says when Timeout starts counting: "" or
	// TimeoutFromArrival (the default) counts the whole budget, queue
	// wait included; TimeoutFromAdmission gives each admitted handler the
	// full Timeout. See TimeoutStart.
	TimeoutFrom TimeoutStart

	// RetryAfter is the Retry-After of every 503 (full, queue timeout,
	// dropped, shutting down, a custom pipeline's rejection): 0 means
	// DefaultRetryAfter (1 s), a negative value sends none. It is rounded
	// up to whole seconds. To compute it per response (from Stats, say),
	// set the field in Render. A 429 always carries the rate limiter's
	// own wait.
	RetryAfter time.Duration

	// Render, when set, is called for every rejection with the error and
	// the default response, and returns the response to send instead
	// (another body format, an extra header): the 429, every 503 and the
	// 504 sent at the deadline (then on the deadline's goroutine). It must
	// not return internal error text to clients. It is not called when
	// nothing is sent (the client went away). A Render that panics gives
	// the default response and an event.HookPanic.
	Render func(err error, def Response) Response

	// AnswerPanics, when set, answers a handler's panic with the 500
	// INTERNAL of the rejections' format (through Render, which gets a
	// *PanicError), once the panic has unwound through the limiter and the
	// permit is back, and logs it with its stack to the server's ErrorLog
	// as net/http does. A panic after the response started, and
	// http.ErrAbortHandler, go on unanswered, as without it. An
	// adapter's entry points (package adapt) return the *PanicError for
	// the adapter to render. Off by default: a framework's recoverer (chi's Recoverer,
	// gin's Recovery, echo's Recover, fiber's recover, connect's
	// WithRecover) already answers, logs and counts panics the way the
	// rest of the service does, and under this option it never sees them;
	// set it where there is no recoverer, or for one JSON body for every
	// error the middleware answers. It costs a writer per request on the
	// net/http entry points. docs/guide.md (Panics) says where the
	// recoverers go.
	AnswerPanics bool

	// Shadow runs the rate limit, the concurrency limiter and the timeout
	// in shadow for a share of requests: decided and counted
	// (Stats.Shadow), not enforced. Zero enforces everything. See Shadow.
	Shadow Shadow
}

// maxTimeout mirrors core's bound: far enough never to matter, near enough
// that adding it to time.Now cannot overflow.
const maxTimeout = 100 * 365 * 24 * time.Hour

// configError builds a *resilience.ConfigError for field.
func configError(field, format string, args ...any) error {
	return &resilience.ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// validate checks the options that New does not hand to a core
// constructor (those report their own fields).
func (o *Options) validate() error {
	if o.Timeout < 0 || o.Timeout > maxTimeout {
		return configError("Options.Timeout", "must be between 0 (no timeout) and %v, got %v", maxTimeout, o.Timeout)
	}
	if o.RetryAfter > maxTimeout {
		return configError("Options.RetryAfter", "must be at most %v (negative sends none), got %v", maxTimeout, o.RetryAfter)
	}
	if err := o.Shadow.validate(o); err != nil {
		return err
	}
	if o.Concurrency != nil && o.Pipeline != nil {
		return configError("Options.Pipeline", "cannot be set together with Options.Concurrency; put the concurrency limiter in the pipeline")
	}
	if err := o.validateBudget(); err != nil {
		return err
	}
	if err := o.validateAdaptive(); err != nil {
		return err
	}
	style, err := parseRateLimitHeaderStyle(string(o.RateLimitHeaders))
	if err != nil {
		return err
	}
	o.RateLimitHeaders = style // the canonical spelling, for the comparisons per request
	return o.ClientIP.validate()
}

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
