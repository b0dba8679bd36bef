package resiliencefiber

import (
	"context"
	"errors"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/log"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// Middleware is the inbound pipeline as fiber middleware. Use Handler with
// app.Use, a Group, or in front of a route's handler. A Middleware is safe
// for concurrent use; all the handlers it guards share its limits. Build
// it with New: the zero value is not usable. A rejected, timed-out or
// panicking request leaves nothing behind (permit and queue place
// returned), as in inbound.Middleware.
type Middleware struct {
	in     *adapt.Kit
	routes routeCache
	// rateFields says whether admitted responses carry RateLimit fields,
	// which a 504 built aside must repeat.
	rateFields bool
	// offTime: a timed request came without ServeOnTime, and was logged.
	offTime atomic.Bool
}

// New validates opts and returns the middleware, or a
// *resilience.ConfigError naming the first invalid field (errors.Is
// resilience.ErrInvalidOptions).
func New(opts inbound.Options) (*Middleware, error) {
	if opts.RateLimit != nil && opts.RateLimit.Key != nil {
		// A store may keep the keys it is given, and a key function
		// reading the request through fiber gets strings backed by
		// fasthttp's buffers, which the next request on the connection
		// overwrites. One copy here keeps every key function safe.
		ro := *opts.RateLimit
		ro.Key = keepKey(ro.Key)
		opts.RateLimit = &ro
	}
	m := &Middleware{}
	in, err := adapt.New(adapt.Framework{
		Route:     func(raw any) string { return m.route(raw.(*fiber.Ctx)) },
		View:      fillView,
		SetHeader: func(raw any, name, value string) { raw.(*fiber.Ctx).Set(name, value) },
	}, opts)
	if err != nil {
		return nil, err
	}
	m.in, m.rateFields = in, in.RateLimitFields()
	return m, nil
}

// cloneKey copies a rate-limit key; a variable so a test can show what
// happens without the copy.
var cloneKey = strings.Clone

func keepKey(key func(context.Context) string) func(context.Context) string {
	return func(ctx context.Context) string { return cloneKey(key(ctx)) }
}

// NewMiddleware is New for code that only needs the fiber handler, named
// as every adapter's shortcut:
//
//	h, err := resiliencefiber.NewMiddleware(opts)
//	app.Use(h)
func NewMiddleware(opts inbound.Options) (fiber.Handler, error) {
	m, err := New(opts)
	if err != nil {
		return nil, err
	}
	return m.Handler, nil
}

// NewHandler is NewMiddleware.
//
// Deprecated: use NewMiddleware, the name every adapter uses.
func NewHandler(opts inbound.Options) (fiber.Handler, error) { return NewMiddleware(opts) }

// call is one request through Handler. Its methods are bound once per
// pooled value, so a request allocates no closure.
type call struct {
	m      *Middleware
	c      *fiber.Ctx
	parent context.Context // c.UserContext() before the middleware
	ran    bool
	err    error // what c.Next returned
	slot   *slot // OnTimeHandler's, or nil
	// head says the request is a HEAD, read before the deadline can
	// fire: the 504 built aside must then have no body.
	head bool
	// rate holds the RateLimit fields of the response for the 504 that
	// expire builds on the deadline's goroutine.
	rate atomic.Pointer[[]headerField]

	answered bool // expire ran: the slot holds the 504, x is not recycled

	run     func(ctx context.Context) error
	expired func(cause error)
}

// calls recycles the calls: nothing holds one once Execute or
// ExecuteInPlace returns, unless the deadline answered the request.
var calls = sync.Pool{New: func() any { return newCall() }}

func newCall() *call {
	x := new(call)
	x.run = x.next
	x.expired = x.expire
	return x
}

// next runs the rest of fiber's chain with the pipeline's context as
// c.UserContext.
func (x *call) next(ctx context.Context) error {
	x.ran = true
	c := x.c
	if ctx != x.parent {
		c.SetUserContext(ctx)
		// Restored so that middleware before this one does not see a
		// context that ended with the request.
		defer c.SetUserContext(x.parent)
	}
	if x.slot != nil && x.m.rateFields {
		fs := rateFields(c)
		x.rate.Store(&fs)
	}
	x.err = c.Next()
	if x.err != nil && clientError(x.err) {
		// A client error the handler chose to answer (404, 400): not a
		// failure of the service for an adaptive limiter or a pipeline.
		return nil
	}
	return x.err
}

// clientError reports whether err is a *fiber.Error with a 4xx status.
func clientError(err error) bool {
	var fe *fiber.Error
	return errors.As(err, &fe) && fe.Code < 500
}

// Handler is the fiber handler: it runs the rest of the chain (c.Next)
// through the inbound pipeline with c.UserContext ending at the deadline,
// and answers rejections as described in the package documentation.
func (m *Middleware) Handler(c *fiber.Ctx) error {
	defer abortOnPanic(c)
	var x *call
	var err error
	if s := slotOf(c); s != nil {
		x = calls.Get().(*call)
		x.m, x.c, x.parent, x.slot, x.head = m, c, c.UserContext(), s, c.Context().IsHead()
		defer func() {
			if !x.answered {
				// Once ExecuteInPlace returned no expired call runs:
				// unless it answered (its 504 is in the slot), nothing
				// holds x.
				*x = call{run: x.run, expired: x.expired}
				calls.Put(x)
			}
		}()
		err = m.in.ExecuteInPlace(x.parent, c, x.run, x.expired)
	} else {
		if m.in.Timed() && !c.Request().IsBodyStream() && m.offTime.CompareAndSwap(false, true) {
			// Not silent: without ServeOnTime the 504 waits for the handler.
			log.Warn("resiliencefiber: a timed request reached the middleware on an app without resiliencefiber.ServeOnTime(app) (or OnTimeHandler): its 504 is sent only when its handler returns, not at the deadline")
		}
		x = calls.Get().(*call)
		x.m, x.c, x.parent = m, c, c.UserContext()
		defer func() {
			x.m, x.c, x.parent, x.ran, x.err = nil, nil, nil, false, nil
			calls.Put(x)
		}()
		err = m.in.Execute(x.parent, c, x.run)
	}
	var pe *inbound.PanicError
	switch {
	case err == nil:
		return x.err
	case errors.As(err, &pe):
		// Options.AnswerPanics: fasthttp has sent nothing yet, so what the
		// handler set before its panic gives way to the 500.
		c.Response().Reset()
		return m.reject(c, err)
	case !x.ran:
		return m.reject(c, err) // 429, 503, or the context ended while queued
	case !errors.Is(err, resilience.ErrTimeoutRejected) && !errors.Is(err, context.DeadlineExceeded):
		return x.err // the handler's own outcome stands
	}
	// Past the deadline. fasthttp has sent nothing yet, so what the
	// handler set must not leak into the 504; the RateLimit fields stay,
	// as in net/http.
	rate := rateFields(c)
	c.Response().Reset()
	for _, f := range rate {
		c.Set(f.name, f.value)
	}
	return m.reject(c, err)
}

// reject answers a rejection: written at once when the app has fiber's
// default ErrorHandler (which would answer text/plain), or returned as a
// *Rejection for the app's own ErrorHandler, with the response's header
// fields but Content-Type already set (Retry-After, RateLimit fields):
// whatever body the ErrorHandler writes, they reach the client.
func (m *Middleware) reject(c *fiber.Ctx, err error) error {
	resp, ok := m.in.Render(err)
	if !ok {
		// The request's context was cancelled (by middleware before this
		// one: fasthttp does not cancel it): nobody to answer.
		closeWithoutResponse(c)
		return nil
	}
	rej := &Rejection{Response: resp, Err: err, fiber: &fiber.Error{Code: resp.Status, Message: http.StatusText(resp.Status)}}
	if defaultErrorHandler(c.App()) {
		return rej.Send(c)
	}
	setHeader(c, resp.Header, false)
	return rej
}

// setHeader sets the fields of h on c's response, Content-Type only if
// withType is set.
func setHeader(c *fiber.Ctx, h http.Header, withType bool) {
	rh := &c.Response().Header
	for k, vs := range h {
		if !withType && k == "Content-Type" {
			continue
		}
		for i, v := range vs {
			if i == 0 {
				rh.Set(k, v)
			} else {
				rh.Add(k, v)
			}
		}
	}
}

// abortOnPanic gives panic(http.ErrAbortHandler) its net/http meaning:
// the connection is closed without a response. fasthttp has no such
// value, so the request hijacks its connection and leaves it unanswered.
// Any other panic goes on unchanged (re-raised inside this deferred call,
// so a recovering middleware still sees the frames where it happened).
func abortOnPanic(c *fiber.Ctx) {
	p := recover()
	if p == nil {
		return
	}
	if p != http.ErrAbortHandler { //nolint:errorlint // net/http compares the value itself
		panic(p)
	}
	closeWithoutResponse(c)
}

// closeWithoutResponse makes fasthttp close c's connection without
// writing a response, by hijacking it and leaving it unanswered.
func closeWithoutResponse(c *fiber.Ctx) {
	rc := c.Context()
	rc.HijackSetNoResponse(true)
	rc.Hijack(func(net.Conn) {})
}

var defaultHandlerPtr = reflect.ValueOf(fiber.DefaultErrorHandler).Pointer()

// defaultErrorHandler reports whether app kept fiber's DefaultErrorHandler.
func defaultErrorHandler(app *fiber.App) bool {
	h := app.Config().ErrorHandler
	return h == nil || reflect.ValueOf(h).Pointer() == defaultHandlerPtr
}

// Rejection is the error the middleware returns for a request it did not
// let through (429, 503) or that ran past its deadline (504), when the
// app has an ErrorHandler of its own. errors.As finds a *fiber.Error in
// it with the status, and the inbound cause (a
// *resilience.ConcurrencyLimitRejectedError, *resilience.RateLimitRejectedError
// or *resilience.TimeoutRejectedError). When the ErrorHandler runs, the
// response already has the default response's header fields but
// Content-Type (Retry-After, RateLimit fields); Send writes the rest. A
// Rejection is not modified after it is returned; read it from any
// goroutine.
type Rejection struct {
	// Response is the default response: status, headers and JSON body,
	// byte for byte what the net/http middleware sends. Treat it as
	// read-only.
	Response inbound.Response
	// Err is the inbound error behind the rejection.
	Err error

	fiber *fiber.Error
}

// Error returns the status text ("Service Unavailable"); it never carries
// internal error text, so an ErrorHandler may send it to the client.
func (r *Rejection) Error() string { return r.fiber.Message }

// Unwrap returns the *fiber.Error with the status, and the inbound cause.
func (r *Rejection) Unwrap() []error { return []error{r.fiber, r.Err} }

// Send writes the default response on c: the status, the headers
// (Content-Type, Retry-After, RateLimit fields) and the JSON body.
func (r *Rejection) Send(c *fiber.Ctx) error {
	setHeader(c, r.Response.Header, true)
	c.Status(r.Response.Status)
	c.Response().SetBody(r.Response.Body)
	return nil
}
