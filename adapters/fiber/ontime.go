package resiliencefiber

import (
	"context"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"sync"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// ServeOnTime makes app send the middleware's 504 at the deadline, while
// the handler keeps running and keeps its permit. Call it once, after
// fiber.New and before app.Listen (or Listener):
//
//	app := fiber.New()
//	resiliencefiber.ServeOnTime(app)
//
// It replaces the fasthttp server's handler with OnTimeHandler(app's
// handler). Without it the 504 is sent when the handler returns.
func ServeOnTime(app *fiber.App) {
	s := app.Server()
	s.Handler = OnTimeHandler(s.Handler)
}

// OnTimeHandler wraps a fiber app's fasthttp handler (app.Handler()) so
// that a request running past the middleware's deadline is answered then,
// for programs that run their own fasthttp.Server:
//
//	srv := &fasthttp.Server{Handler: resiliencefiber.OnTimeHandler(app.Handler())}
//
// Each request runs h on a goroutine of its own (adapt.Go's) while the
// connection's goroutine waits for it to return or for the middleware to
// report the deadline. At the deadline the connection's goroutine hands the 504 to
// fasthttp with RequestCtx.TimeoutErrorWithResponse and returns: fasthttp
// sends it (with Connection: close) and never reuses that RequestCtx,
// which the handler, fiber's pooled Ctx and the permit keep until the
// handler returns; its late writes go to a response nobody sends.
//
// A request whose body is streamed (fiber.Config.StreamRequestBody) is
// served as without the wrapper, its 504 sent when the handler returns:
// fasthttp would hand the connection's reader, which the late handler
// still reads the body from, to other connections.
//
// A panic in h is raised again on the connection's goroutine, as without
// the wrapper; after the 504 it can only be raised where it happened, so
// recover panics in the app (fiber's recover middleware) as any fiber app
// should.
func OnTimeHandler(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(rc *fasthttp.RequestCtx) {
		if rc.Request.IsBodyStream() {
			// The body is still read from the connection (fiber's
			// StreamRequestBody), through a reader fasthttp hands to
			// other connections once this handler returns: a late
			// handler could read another client's bytes. Such a
			// request gets its 504 when its handler returns.
			h(rc)
			return
		}
		s := slots.Get().(*slot)
		rc.SetUserValue(slotKey{}, s)
		s.h, s.rc = h, rc
		s.hand.Start(context.Background(), s) // on a goroutine whose stack has grown already, mostly
		if s.hand.Wait() {
			// The late handler keeps s: it is not recycled.
			rc.TimeoutErrorWithResponse(s.resp)
			return
		}
		// The handler returned first (a panic of its was raised by Wait),
		// and with it ExecuteInPlace, which leaves no expired call
		// running: nothing holds s any more.
		rc.RemoveUserValue(slotKey{})
		s.resp, s.h, s.rc = nil, nil, nil
		slots.Put(s)
	}
}

// slots recycles the slots of requests answered by their handler.
var slots = sync.Pool{New: func() any { return new(slot) }}

// slotKey is the RequestCtx user value under which OnTimeHandler leaves a
// request's slot for the middleware.
type slotKey struct{}

// slot links one request's middleware with OnTimeHandler: the handler runs
// through its Handoff, which the deadline answers with the 504 in resp.
type slot struct {
	hand adapt.Handoff
	resp *fasthttp.Response // the 504, set between Claim and Wake

	h  fasthttp.RequestHandler // what Run runs
	rc *fasthttp.RequestCtx
}

// Run runs the handler, on its worker. A panic after the 504 is raised
// again there, as fasthttp would have let it.
func (s *slot) Run() { s.h(s.rc) }

// expire sends resp at once, unless the handler returned first.
func (s *slot) expire(resp *fasthttp.Response) {
	if s.hand.Claim() {
		s.resp = resp
		s.hand.Wake()
	}
}

func slotOf(c *fiber.Ctx) *slot {
	s, _ := c.Context().UserValue(slotKey{}).(*slot)
	return s
}

// expire hands the rendered 504 to OnTimeHandler, with the RateLimit
// fields the response already had.
func (x *call) expire(cause error) {
	x.answered = true
	resp, ok := x.m.in.Render(cause)
	if !ok {
		return
	}
	r := timeoutResponse(resp)
	// fasthttp sends r on a fresh RequestCtx, which no longer knows the
	// request was a HEAD.
	r.SkipBody = x.head
	if fs := x.rate.Load(); fs != nil {
		for _, f := range *fs {
			r.Header.Set(f.name, f.value)
		}
	}
	x.slot.expire(r)
}

// timeoutResponse is resp as a complete fasthttp response that closes the
// connection, as the net/http middleware's 504 does.
func timeoutResponse(resp inbound.Response) *fasthttp.Response {
	r := new(fasthttp.Response)
	for k, vs := range resp.Header {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	r.SetStatusCode(resp.Status)
	r.SetBody(resp.Body)
	r.SetConnectionClose()
	return r
}
