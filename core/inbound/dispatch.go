package inbound

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// gate is the concurrency stage: the fixed or the adaptive limiter, whose
// permits dispatch takes and returns itself, or a custom pipeline, which
// runs the request through its callback.
//
// A request first tries for a free permit (tryAcquire): that fast path
// needs no request view, no telemetry and no allocation. Otherwise
// acquire queues or sheds through core's own engine, which emits the
// rejection event (with the time spent queued). Either way dispatch runs
// the request and returns the permit with its outcome, also when it
// panics.
type gate struct {
	fixed    *resilience.ConcurrencyLimiter
	adaptive *resilience.AdaptiveLimiter
	tel      resilience.Telemetry
}

// permit is a permit of the gate's limiter: both limiters take and
// release theirs the same way (TryAcquire, Admit, the permit's Release).
type permit struct {
	fixed    resilience.ConcurrencyPermit
	adaptive resilience.AdaptivePermit
}

func (g *gate) tryAcquire() (permit, bool) {
	if g.fixed != nil {
		p, ok := g.fixed.TryAcquire()
		return permit{fixed: p}, ok
	}
	p, ok := g.adaptive.TryAcquire()
	return permit{adaptive: p}, ok
}

// acquire queues for a permit, or rejects, with ctx carrying the view the
// Priority and Flow functions read. cost is the request's permits (see
// cost.go), 0 without a Cost function.
func (g *gate) acquire(ctx context.Context, cost int) (permit, error) {
	if g.fixed != nil {
		if cost > 0 {
			p, err := g.fixed.AdmitN(ctx, g.tel, cost)
			return permit{fixed: p}, err
		}
		p, err := g.fixed.Admit(ctx, g.tel)
		return permit{fixed: p}, err
	}
	p, err := g.adaptive.Admit(ctx, g.tel)
	return permit{adaptive: p}, err
}

// release returns p with the request's outcome (the fixed limiter ignores
// it).
func (g *gate) release(ctx context.Context, p permit, o resilience.LimitOutcome) {
	if g.fixed != nil {
		p.fixed.Release()
		return
	}
	if err := p.adaptive.Release(o); err != nil {
		// The limit.Algorithm panicked as this release closed its window:
		// contained by the limiter, reported here.
		g.tel.Emit(ctx, event.Event{Name: event.HookPanic, Reason: event.HookLimitAlgorithm, Err: err})
	}
}

func (g *gate) stats() resilience.LimiterStats {
	if g.fixed != nil {
		return g.fixed.Stats()
	}
	return g.adaptive.Stats()
}

// classify runs the adaptive limiter's classifier for a callback's error,
// with a panic of the user's Classifier reported before it fails this
// request.
func (g *gate) classify(ctx context.Context, c resilience.Classifier, err error) resilience.LimitOutcome {
	defer func() {
		if v := recover(); v != nil { // reported, then on to the request (core's rule for hooks)
			g.tel.EmitHookPanic(ctx, event.HookClassifier, v)
			panic(v)
		}
	}()
	return c(ctx, err)
}

// call is what an entry point hands to dispatch: the framework's objects
// and what runs once the request is admitted. Passed by value, so the
// fast path keeps it on the stack.
type call struct {
	ctx  context.Context // the request's own context
	raw  any             // Request.Raw
	w    http.ResponseWriter
	r    *http.Request
	next http.Handler // Handler
	cont continueFunc // Serve
	fn   func(ctx context.Context) error
	// expired, for ExecuteInPlace, answers the deadline while fn runs on.
	expired func(cause error)
	// counted: fn's deadline was answered, and the request counted, before
	// fn returned (set by runFn as it ends, also when fn panics).
	counted bool
	// arrival is the deadline of the request's budget when it counts
	// from arrival and the request had to queue; zero otherwise.
	arrival time.Time
	// Under ServeAnswering: the caller's deadline (zero: none), the
	// adapter's answerer, and the request's engine, allocated with its
	// detached writer.
	deadline time.Time
	ans      deadlineAnswer
	timed    *answeredRequest
}

func (c *call) isHTTP() bool { return c.r != nil }

// exchange is a request that needs its view (a rate-limit key, a
// Priority function or a custom pipeline may read it): the view embedded
// with its context, so view and context are one allocation, and, for a
// custom pipeline, what its callback runs.
type exchange struct {
	m    *Middleware
	c    call
	vc   viewContext
	ran  atomic.Bool // the pipeline's callback ran the handler
	res  result      // how a net/http request under the pipeline ended
	cost int         // the request's permits, under a Cost function (cost.go)
}

// newExchange returns an exchange for c with its view built.
func (m *Middleware) newExchange(c *call) *exchange {
	x := &exchange{m: m, c: *c}
	x.buildView()
	return x
}

// buildView fills the view from the framework's request.
func (x *exchange) buildView() {
	m, v := x.m, &x.vc.req
	x.vc.Context = x.c.ctx
	v.Raw = x.c.raw
	v.routeFn = m.fw.Route
	switch {
	case x.c.isHTTP():
		v.fillFromHTTP(x.c.r)
	case m.fw.View != nil:
		m.fw.View(x.c.raw, v)
	default:
		if hr, ok := x.c.raw.(*http.Request); ok {
			v.fillFromHTTP(hr)
		}
	}
	v.resolve(&m.opts.ClientIP)
}

// viewCtx is the context carrying the view.
func (x *exchange) viewCtx() context.Context { return &x.vc }

// errHandlerRan is what a second call of the callback returns: a retry or
// hedging strategy in a custom inbound pipeline must not run the handler
// again, since its response is already under way.
var errHandlerRan = errors.New("inbound: the handler already ran for this request")

// runPipeline runs the request through the custom pipeline.
func (x *exchange) runPipeline() error {
	counted := false
	defer func() {
		if !counted && x.ran.Load() { // the handler panicked (see runHeld)
			x.m.requests.panicked(httpTimedOut(&x.res), x.counted())
		}
	}()
	_, err := x.m.pipeline.Execute(x.viewCtx(), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, x.run(ctx)
	})
	counted = true
	switch {
	case !x.ran.Load():
		x.m.requests.rejected(err)
	case x.c.isHTTP():
		x.m.requests.ran(httpTimedOut(&x.res), x.res.counted)
		return nil // answered by the handler or the timed writer
	default:
		x.m.requests.ran(fnTimedOut(err), x.c.counted)
	}
	return err
}

// counted reports whether the request's deadline answer counted it.
func (x *exchange) counted() bool { return x.c.counted || x.res.counted }

// run is a custom pipeline's callback, with the pipeline's context.
func (x *exchange) run(ctx context.Context) error {
	if !x.ran.CompareAndSwap(false, true) {
		return errHandlerRan
	}
	m := x.m
	if !x.c.isHTTP() {
		return m.runFn(ctx, &x.c, true)
	}
	m.runHTTP(ctx, &x.c, &x.res, true)
	switch {
	case ctx.Err() != nil && isTimeout(context.Cause(ctx)):
		// A timeout strategy in the pipeline reports its deadline (and
		// emits its event) only when the callback fails; the 504 itself
		// was sent by the timed writer.
		return context.Cause(ctx)
	case m.hasTimeout && httpTimedOut(&x.res):
		// The middleware's deadline answered 504: the pipeline's
		// strategies (an execution timer, a limiter's classifier) see
		// the client's outcome, not the late handler's return.
		return m.tconf.Load().err
	}
	return nil
}

// dispatch is admission, for every entry point: the rate limit, then a
// permit of the limiter (a free one at once, or through the queue), the
// handler, and the permit returned with the request's outcome; under a
// custom pipeline the pipeline runs the request instead. It returns a
// rejection that came before the handler ran, for the entry point to
// render, or fn's error; after a net/http handler ran it returns nil (the
// response is sent).
func (m *Middleware) dispatch(c *call) (err error) {
	if m.opts.AnswerPanics {
		defer answerPanic(c, c.watchPanics(), &err) // see panics.go
	}
	if m.draining.Load() {
		m.requests.rejected(errShuttingDown)
		return errShuttingDown
	}
	var x *exchange // set once the request needs its view
	if m.rate != nil {
		x = m.newExchange(c)
		shadow := m.shadow.rate.Load() > 0 && shadowed(&m.shadow.rate)
		if err := m.takeRate(x, shadow); err != nil {
			if !shadow {
				m.requests.rejected(err)
				return err
			}
			m.shadowRate(x.viewCtx()) // counted, not enforced: the request goes on
		}
	}
	switch {
	case m.pipeline != nil:
		if x == nil {
			x = m.newExchange(c)
		}
		return x.runPipeline()
	case m.gate == nil:
		return m.runHeld(c.ctx, c, nil, permit{})
	}
	if m.cost != nil {
		return m.dispatchCost(c, x) // cost.go
	}
	// The free-permit shortcut: no view, no telemetry, no allocation.
	if c.ctx.Err() == nil {
		if p, ok := m.gate.tryAcquire(); ok {
			return m.runHeld(c.ctx, c, m.gate, p)
		}
	}
	return m.queueOrShed(c, x, 0)
}

// queueOrShed is dispatch once no permit was free: the request runs
// without one in shadow, or queues or is shed, with its view in x when
// it was built (nil: built here if the queue reads it). cost is its
// permits under a Cost function, 0 without one.
func (m *Middleware) queueOrShed(c *call, x *exchange, cost int) error {
	if m.shadow.conc.Load() > 0 && c.ctx.Err() == nil && shadowed(&m.shadow.conc) {
		return m.runOver(c) // no free permit: counted, and run without one
	}
	ctx := c.ctx
	if m.queueView && x == nil {
		x = m.newExchange(c)
	}
	if x != nil {
		ctx = x.viewCtx()
	}
	c.arrival = m.arrivalDeadline()
	if !c.deadline.IsZero() {
		// The caller's deadline bounds the wait; only a queued request
		// pays for the context.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, c.deadline)
		defer cancel()
	}
	p, err := m.gate.acquire(ctx, cost)
	if err != nil {
		m.requests.rejected(err)
		return err
	}
	if cost > 1 {
		return m.runCostly(ctx, c, p)
	}
	return m.runHeld(ctx, c, m.gate, p)
}

// runHeld runs c's handler (or fn) with the request's own context, under
// p when g is set, and returns p with the request's outcome when the
// handler really returns or panics. ctx, the context admission ran with,
// is for the classifier and telemetry.
func (m *Middleware) runHeld(ctx context.Context, c *call, g *gate, p permit) error {
	if !c.isHTTP() {
		return m.runHeldFn(ctx, c, g, p)
	}
	m.runHeldHTTP(ctx, c, g, p)
	return nil
}

// runHeldFn is runHeld for a callback. The two are apart so that each
// frame holds only its own state: a callback often runs on a goroutine
// an adapter started for the request, whose stack is small.
func (m *Middleware) runHeldFn(ctx context.Context, c *call, g *gate, p permit) (err error) {
	// A callback that panics skips the count of how it ended: it is
	// counted as it unwinds (an open-coded defer, no allocation).
	counted := false
	defer func() {
		if !counted {
			m.requests.panicked(false, c.counted)
		}
	}()
	if g == nil {
		err = m.runFn(c.ctx, c, false)
		m.requests.ran(fnTimedOut(err), c.counted)
		counted = true
		return err
	}
	outcome := resilience.LimitIgnored // if fn panics
	defer func() { g.release(ctx, p, outcome) }()
	err = m.runFn(c.ctx, c, false)
	m.requests.ran(fnTimedOut(err), c.counted)
	counted = true
	if m.measure {
		outcome = g.classify(ctx, m.classify, err)
	}
	return err
}

// runHeldHTTP is runHeld for a net/http handler.
func (m *Middleware) runHeldHTTP(ctx context.Context, c *call, g *gate, p permit) {
	var res result // stays zero (ignored by the limiter) if the handler panics before its end
	counted := false
	// One deferred call returns the permit with the outcome and, for a
	// handler that panicked (and so skipped its count), counts it as it
	// unwinds: as timed out if its 504 went first.
	defer func() {
		if !counted {
			m.requests.panicked(httpTimedOut(&res), res.counted)
		}
		if g != nil {
			o := resilience.LimitIgnored
			if m.measure {
				o = res.outcome()
			}
			g.release(ctx, p, o)
		}
	}()
	r := &res
	if !m.measure {
		r = m.timedResult(c, &res)
	}
	m.runHTTP(c.ctx, c, r, false)
	m.requests.ran(httpTimedOut(&res), res.counted)
	counted = true
}

// timedResult is res when a deadline can answer a net/http request (the
// timed writer fills it at no cost), nil otherwise (an untimed request
// cannot time out, and recording its status would cost a writer).
func (m *Middleware) timedResult(c *call, res *result) *result {
	if m.hasTimeout || m.pipeline != nil || c.ans != nil {
		return res
	}
	return nil
}

// runHTTP runs a net/http handler with ctx, timed when a timeout or a
// custom pipeline (whose timeout strategy may end ctx) can end it. A
// non-nil res receives how the request ended.
func (m *Middleware) runHTTP(ctx context.Context, c *call, res *result, custom bool) {
	if m.hasTimeout || custom || c.ans != nil {
		m.serveTimed(ctx, c, custom, res)
		return
	}
	r := c.r
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	if res == nil {
		c.invoke(c.w, r)
		return
	}
	sw := &statusWriter{w: c.w}
	c.invoke(sw, r)
	*res = result{completed: true, state: stateCommitted, status: sw.status}
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

// result is how a net/http request under the adaptive limiter ended,
// filled in by whichever writer it ran with.
type result struct {
	completed  bool        // the handler returned (false: it panicked)
	state      writerState // the writer's state when it returned
	status     int         // the response status; 0 if none was written
	clientGone bool        // the request's own context ended, not by time
	counted    bool        // the deadline's answer counted it, before the handler returned
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

// takeRate applies the rate limit to the request in x, with core's
// events (none in shadow), and records the decision on its view, and on the response's
// header when admitted.
func (m *Middleware) takeRate(x *exchange, shadow bool) error {
	tel := m.rateTel
	if shadow {
		tel = resilience.Telemetry{} // a refusal is reported as a shadow decision instead
	}
	d, err := m.rate.Take(x.viewCtx(), tel) // core's decision and events
	if !d.Allowed {
		return err
	}
	if err != nil {
		return nil // the store failed open: no numbers to report, no headers
	}
	v := &x.vc.req
	v.rateLimited = true
	v.rateDecision = d
	if m.opts.RateLimitHeaders == RateLimitHeadersOff {
		return nil
	}
	switch {
	case x.c.w != nil:
		m.setRateLimitFields(x.c.w.Header(), d.Limit, d.Remaining, d.Reset)
	case m.fw.SetHeader != nil:
		h := make(http.Header, 3)
		m.setRateLimitFields(h, d.Limit, d.Remaining, d.Reset)
		for k, vs := range h {
			m.fw.SetHeader(x.c.raw, k, vs[0])
		}
	}
	return nil
}

// Counting: dispatch counts every request once, as it ends (Stats'
// RequestCounts), on the request's goroutine, beside the permit's return.

// requestCounters are RequestCounts as they are counted: one atomic add
// per request, on the request's goroutine.
type requestCounters struct {
	admitted, timedOut, rateLimited                  atomic.Uint64
	full, queueTimeout, dropped, shuttingDown, other atomic.Uint64
	panics                                           atomic.Uint64
	storeUnavailable                                 atomic.Uint64
}

func (r *requestCounters) load() RequestCounts {
	return RequestCounts{
		Admitted: r.admitted.Load(), TimedOut: r.timedOut.Load(), RateLimited: r.rateLimited.Load(),
		Full: r.full.Load(), QueueTimeout: r.queueTimeout.Load(), Dropped: r.dropped.Load(),
		ShuttingDown: r.shuttingDown.Load(), Canceled: r.other.Load(), Panicked: r.panics.Load(),
		StoreUnavailable: r.storeUnavailable.Load(),
	}
}

// ran counts a request whose handler ran; timedOut says the deadline
// answered it, and counted that the answer counted it already, as it went
// out (timing.pass), so its return counts nothing more.
func (r *requestCounters) ran(timedOut, counted bool) { r.end(timedOut, counted, &r.admitted) }

// panicked counts a request whose handler panicked; timedOut says the
// deadline had answered it already (the client got its 504), and counted
// that the answer counted it then.
func (r *requestCounters) panicked(timedOut, counted bool) { r.end(timedOut, counted, &r.panics) }

// end counts a handler's end in n, or as a timeout if the deadline
// answered it, unless the answer counted it already.
func (r *requestCounters) end(timedOut, counted bool, n *atomic.Uint64) {
	switch {
	case counted:
	case timedOut:
		r.timedOut.Add(1)
	default:
		n.Add(1)
	}
}

// rejected counts a request refused before its handler ran with err.
func (r *requestCounters) rejected(err error) {
	reason, ok := concurrencyReason(err)
	switch {
	case ok:
		switch reason {
		case resilience.ReasonFull:
			r.full.Add(1)
		case resilience.ReasonQueueTimeout:
			r.queueTimeout.Add(1)
		case resilience.ReasonDropped:
			r.dropped.Add(1)
		case resilience.ReasonShuttingDown:
			r.shuttingDown.Add(1)
		default:
			r.other.Add(1)
		}
	case errors.Is(err, resilience.ErrRateLimitRejected):
		r.rateLimited.Add(1)
	case storeFailedClosed(err):
		r.storeUnavailable.Add(1)
	default:
		r.other.Add(1)
	}
}

// concurrencyReason is the reason of a *resilience.ConcurrencyLimitRejectedError in
// err. The limiters return one as it is: asked first, it costs no
// allocation (errors.As's target escapes).
func concurrencyReason(err error) (resilience.RejectReason, bool) {
	if b, ok := err.(*resilience.ConcurrencyLimitRejectedError); ok {
		return b.Reason, true
	}
	var b *resilience.ConcurrencyLimitRejectedError
	if errors.As(err, &b) {
		return b.Reason, true
	}
	return "", false
}

// fnTimedOut reports whether Execute's callback (c.fn), which returned
// err, was answered by a deadline (runFn returns the timeout then,
// whatever fn returned).
func fnTimedOut(err error) bool { return isTimeout(err) }

// httpTimedOut reports whether a net/http request that ended as res was
// answered by its deadline.
func httpTimedOut(res *result) bool {
	return res.state == stateTimedOut || res.state == stateAborted
}
