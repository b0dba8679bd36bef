package resiliencefiber

import (
	"context"
	"errors"
	"net"
	"net/http"
	"reflect"
	"strings"

	"github.com/gofiber/fiber/v2"

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
	in *inbound.Middleware
	// view says whether a priority or key function or a custom pipeline
	// may read the request view; only then is it built.
	view   bool
	timed  bool
	routes routeCache
}

// New validates opts and returns the middleware, or a
// *resilience.ConfigError naming the first invalid field (errors.Is
// resilience.ErrInvalidOptions).
func New(opts inbound.Options) (*Middleware, error) {
	if opts.RateLimit != nil && opts.RateLimit.Key != nil {
		// The limiter keeps every key it is given, and a key function
		// reading the request through fiber gets strings backed by
		// fasthttp's buffers, which the next request on the connection
		// overwrites. One copy here keeps every key function safe.
		ro := *opts.RateLimit
		ro.Key = keepKey(ro.Key)
		opts.RateLimit = &ro
	}
	in, err := inbound.New(opts)
	if err != nil {
		return nil, err
	}
	return &Middleware{
		in:    in,
		view:  opts.RateLimit != nil || opts.Pipeline != nil || (opts.Concurrency != nil && opts.Concurrency.Priority != nil) || (opts.Adaptive != nil && opts.Adaptive.Priority != nil),
		timed: opts.Timeout > 0,
	}, nil
}

// cloneKey copies a rate-limit key; a variable so a test can show what
// happens without the copy.
var cloneKey = strings.Clone

func keepKey(key func(context.Context) string) func(context.Context) string {
	return func(ctx context.Context) string { return cloneKey(key(ctx)) }
}

// NewHandler is New for code that only needs the fiber handler:
//
//	h, err := resiliencefiber.NewHandler(opts)
//	app.Use(h)
func NewHandler(opts inbound.Options) (fiber.Handler, error) {
	m, err := New(opts)
	if err != nil {
		return nil, err
	}
	return m.Handler, nil
}

// Inbound returns the underlying inbound middleware: its Stats and
// StatsHandler, and its Limiter to change the limit at run time.
func (m *Middleware) Inbound() *inbound.Middleware { return m.in }

// Stats returns the middleware's current load (see inbound.Stats).
func (m *Middleware) Stats() inbound.Stats { return m.in.Stats() }

// Handler is the fiber handler: it runs the rest of the chain (c.Next)
// through the inbound pipeline with c.UserContext ending at the deadline,
// and answers rejections as described in the package documentation.
func (m *Middleware) Handler(c *fiber.Ctx) error {
	defer abortOnPanic(c)
	var req *inbound.Request
	if m.view {
		req = m.newView(c)
	}
	var (
		ran     bool
		nextErr error
	)
	parent := c.UserContext()
	err := m.in.Execute(parent, req, func(ctx context.Context) error {
		ran = true
		c.SetUserContext(ctx)
		// Restored so that middleware before this one does not see a
		// context that ended with the request.
		defer c.SetUserContext(parent)
		m.in.RateLimitHeaders(req, c.Set)
		if m.timed {
			if s := slotOf(c); s != nil {
				stop := context.AfterFunc(ctx, func() { m.expire(ctx, s, req) })
				defer stop()
			}
		}
		nextErr = c.Next()
		return nextErr
	})
	switch {
	case err == nil:
		return nil
	case ran && !errors.Is(err, resilience.ErrTimeoutRejected):
		// The handler's own error (or nil, from a custom pipeline that
		// reports something else): fiber's error flow takes it as it is.
		if err == nextErr {
			return err
		}
	case ran:
		// Past the deadline. fasthttp has sent nothing yet, so what the
		// handler set must not leak into the 504.
		c.Response().Reset()
	}
	// As in net/http, a request the rate limit admitted carries its
	// fields whatever stage answered it.
	m.in.RateLimitHeaders(req, c.Set)
	return m.reject(c, err)
}

// reject answers a rejection: written at once when the app has fiber's
// default ErrorHandler (which would answer text/plain), or returned as a
// *Rejection for the app's own ErrorHandler.
func (m *Middleware) reject(c *fiber.Ctx, err error) error {
	resp, ok := m.in.Render(err)
	if !ok {
		return nil // the request's context was cancelled: nobody to answer
	}
	rej := &Rejection{Response: resp, Err: err, fiber: &fiber.Error{Code: resp.Status, Message: http.StatusText(resp.Status)}}
	if defaultErrorHandler(c.App()) {
		rej.Send(c)
		return nil
	}
	return rej
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
// *resilience.BulkheadRejectedError, *resilience.RateLimitRejectedError
// or *resilience.TimeoutRejectedError). Send writes the default response.
// A Rejection is not modified after it is returned; read it from any
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
	h := &c.Response().Header
	for k, vs := range r.Response.Header {
		for i, v := range vs {
			if i == 0 {
				h.Set(k, v)
			} else {
				h.Add(k, v)
			}
		}
	}
	c.Status(r.Response.Status)
	c.Response().SetBody(r.Response.Body)
	return nil
}
