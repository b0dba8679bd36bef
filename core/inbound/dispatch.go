package inbound

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// gate is the concurrency stage: the fixed limiter, the adaptive limiter
// or a custom pipeline. dispatch is its one user, for every entry point.
//
// A request first tries for a free permit (tryAcquire): that fast path
// needs no request view, no telemetry and no allocation. Otherwise
// execute runs the request through core's own strategy, which queues or
// sheds, emits the rejection event (with the time spent queued), runs the
// exchange, and returns the permit with the exchange's outcome, also when
// it panics.
type gate interface {
	tryAcquire() (permit, bool)
	execute(ctx context.Context, x *exchange) error
	stats() (resilience.LimiterStats, bool)
}

// permit is a permit taken on the fast path.
type permit struct {
	fixed    *resilience.ConcurrencyLimiter
	adaptive resilience.AdaptivePermit
	ag       *adaptiveGate
}

func (p permit) release(o resilience.LimitOutcome) {
	if p.fixed != nil {
		p.fixed.Release()
		return
	}
	if err := p.adaptive.Release(o); err != nil {
		// The limit.Algorithm panicked as this release closed its window:
		// contained by the limiter, reported here.
		p.ag.tel.Emit(context.Background(), event.Event{Name: event.HookPanic, Reason: event.HookLimitAlgorithm, Err: err})
	}
}

type fixedGate struct {
	l   *resilience.ConcurrencyLimiter
	tel resilience.Telemetry
}

func (g *fixedGate) tryAcquire() (permit, bool) { return permit{fixed: g.l}, g.l.TryAcquire() }

func (g *fixedGate) execute(ctx context.Context, x *exchange) error {
	return g.l.Execute(ctx, g.tel, x.run)
}

func (g *fixedGate) stats() (resilience.LimiterStats, bool) { return g.l.Stats(), true }

type adaptiveGate struct {
	l   *resilience.AdaptiveLimiter
	tel resilience.Telemetry
}

func (g *adaptiveGate) tryAcquire() (permit, bool) {
	p, ok := g.l.TryAcquire()
	return permit{adaptive: p, ag: g}, ok
}

func (g *adaptiveGate) execute(ctx context.Context, x *exchange) error {
	return g.l.Execute(ctx, g.tel, x.run)
}

func (g *adaptiveGate) stats() (resilience.LimiterStats, bool) { return g.l.Stats(), true }

// classify runs the classifier for a request admitted on the fast path
// (the limiter's Execute runs it for the others), with a panic of the
// user's Classifier reported before it fails this request.
func (g *adaptiveGate) classify(ctx context.Context, c resilience.Classifier, err error) resilience.LimitOutcome {
	defer reportHookPanic(ctx, g.tel, event.HookClassifier)
	return c(ctx, err)
}

type pipelineGate struct {
	p       *resilience.Pipeline[struct{}]
	statsFn func() resilience.LimiterStats
}

func (g *pipelineGate) tryAcquire() (permit, bool) { return permit{}, false }

func (g *pipelineGate) execute(ctx context.Context, x *exchange) error {
	_, err := g.p.Execute(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, x.run(ctx)
	})
	return err
}

func (g *pipelineGate) stats() (resilience.LimiterStats, bool) {
	if g.statsFn == nil {
		return resilience.LimiterStats{}, false
	}
	return g.statsFn(), true
}

// outcomeSignal carries a net/http request's outcome, read from its
// response, out of the adaptive limiter's Execute into its classifier
// (see classifyWith). The values are shared; nothing else returns them.
type outcomeSignal struct{ o resilience.LimitOutcome }

func (*outcomeSignal) Error() string { return "inbound: request outcome" }

var outcomeSignals = [...]*outcomeSignal{
	resilience.LimitSampled:   {resilience.LimitSampled},
	resilience.LimitDropped:   {resilience.LimitDropped},
	resilience.LimitIgnored:   {resilience.LimitIgnored},
	resilience.LimitAbandoned: {resilience.LimitAbandoned},
}

func signalOutcome(o resilience.LimitOutcome) error {
	if int(o) < len(outcomeSignals) {
		return outcomeSignals[o]
	}
	return outcomeSignals[resilience.LimitSampled]
}

// classifyWith wraps the adaptive limiter's classifier: an outcome read
// from the response wins; an error from Execute's callback goes to the
// configured classifier.
func classifyWith(c resilience.Classifier) resilience.Classifier {
	if c == nil {
		c = resilience.DefaultClassify
	}
	return func(ctx context.Context, err error) resilience.LimitOutcome {
		if s, ok := err.(*outcomeSignal); ok {
			return s.o
		}
		return c(ctx, err)
	}
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
	cont Continue     // Serve
	fn   func(ctx context.Context) error
	// timed, for ExecuteTimed, answers the deadline while fn runs on.
	timed *timedCall
}

func (c *call) isHTTP() bool { return c.r != nil }

// invoke calls the rest of the chain with the writer and request to use.
func (c *call) invoke(w http.ResponseWriter, r *http.Request) {
	if c.next != nil {
		c.next.ServeHTTP(w, r)
		return
	}
	c.cont(w, r, c.raw)
}

// exchange is a request that needs more than the fast path: its view
// (embedded, so view and context are one allocation) and what core's
// strategy calls back.
type exchange struct {
	m    *Middleware
	c    call
	vc   viewContext // the view and its context; vc.Context nil: no view
	res  result
	ran  atomic.Bool
	pool bool // returned to exchanges after use: no view escaped
}

// exchanges recycles the exchanges of requests without a view: nothing
// keeps one after dispatch returns, since core's strategies only call
// back while they run and saw the request's own context, not the
// exchange.
var exchanges = sync.Pool{New: func() any { return new(exchange) }}

// newExchange returns an exchange for c, with the request view built when
// withView is set.
func (m *Middleware) newExchange(c *call, withView bool) *exchange {
	var x *exchange
	if withView {
		x = &exchange{m: m, c: *c}
		x.buildView()
	} else {
		x = exchanges.Get().(*exchange)
		x.m, x.c, x.pool = m, *c, true
	}
	return x
}

// done recycles x if nothing can hold it.
func (x *exchange) done() {
	if x.pool {
		*x = exchange{}
		exchanges.Put(x)
	}
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

// viewCtx is the context carrying the view, or the request's own.
func (x *exchange) viewCtx() context.Context {
	if x.vc.Context == nil {
		return x.c.ctx
	}
	return &x.vc
}

// errHandlerRan is what a second call of the callback returns: a retry or
// hedging strategy in a custom inbound pipeline must not run the handler
// again, since its response is already under way.
var errHandlerRan = errors.New("inbound: the handler already ran for this request")

// run is what the gate's strategy calls once the request is admitted,
// with the strategy's context.
func (x *exchange) run(ctx context.Context) error {
	if !x.ran.CompareAndSwap(false, true) {
		return errHandlerRan
	}
	m := x.m
	custom := m.pipeline != nil
	if !custom {
		// The limiters' context is the one carrying the view; the
		// handler gets the request's own.
		ctx = x.c.ctx
	}
	if !x.c.isHTTP() {
		return m.runFn(ctx, &x.c)
	}
	m.runHTTP(ctx, &x.c, &x.res, custom)
	switch {
	case m.measure:
		return signalOutcome(x.res.outcome())
	case custom && ctx.Err() != nil && isTimeout(context.Cause(ctx)):
		// A timeout strategy in the pipeline reports its deadline (and
		// emits its event) only when the callback fails; the 504 itself
		// was sent by the timed writer.
		return context.Cause(ctx)
	case custom && m.timeoutErr != nil && httpTimedOut(&x.res):
		// The middleware's deadline answered 504: the pipeline's
		// strategies (an execution timer, a limiter's classifier) see
		// the client's outcome, not the late handler's return.
		return m.timeoutErr
	}
	return nil
}

// dispatch runs c through the stages: rate limit, then the gate (or
// straight to the handler without one). It returns a rejection that came
// before the handler ran, for the entry point to render, or fn's error;
// after a net/http handler ran it returns nil (the response is sent).
func (m *Middleware) dispatch(c *call) error {
	if m.draining.Load() {
		m.requests.rejected(errShuttingDown)
		return errShuttingDown
	}
	var x *exchange // set once the request needs more than the fast path
	if m.rate != nil {
		x = m.newExchange(c, true)
		if err := m.takeRate(x); err != nil {
			m.requests.rejected(err)
			return err
		}
	}
	if m.gate == nil {
		if !c.isHTTP() {
			err := m.runFn(c.ctx, c)
			m.requests.ran(fnTimedOut(c, err))
			return err
		}
		var res result
		m.runHTTP(c.ctx, c, m.timedResult(&res), false)
		m.requests.ran(httpTimedOut(&res))
		return nil
	}
	if c.ctx.Err() == nil {
		if p, ok := m.gate.tryAcquire(); ok {
			return m.runHeld(c, p)
		}
	}
	if x == nil {
		x = m.newExchange(c, m.queueView)
		defer x.done()
	}
	err := m.gate.execute(x.viewCtx(), x)
	if !x.ran.Load() {
		m.requests.rejected(err)
		return err // a rejection: the handler did not run
	}
	if c.isHTTP() {
		m.requests.ran(httpTimedOut(&x.res))
		return nil // answered by the handler or the timed writer
	}
	m.requests.ran(fnTimedOut(&x.c, err))
	return err
}

// timedResult is res when a deadline can answer a net/http request (the
// timed writer fills it at no cost), nil otherwise (an untimed request
// cannot time out, and recording its status would cost a writer).
func (m *Middleware) timedResult(res *result) *result {
	if m.timeout > 0 || m.pipeline != nil {
		return res
	}
	return nil
}

// runHeld runs c under a permit taken on the fast path and returns the
// permit, with the request's outcome, when the handler really returns or
// panics.
func (m *Middleware) runHeld(c *call, p permit) (err error) {
	if !c.isHTTP() {
		outcome := resilience.LimitIgnored // if fn panics
		defer func() { p.release(outcome) }()
		err = m.runFn(c.ctx, c)
		m.requests.ran(fnTimedOut(c, err))
		if m.measure {
			outcome = p.ag.classify(c.ctx, m.classify, err)
		}
		return err
	}
	var res result // stays zero (ignored) if the handler panics
	defer func() { p.release(res.outcome()) }()
	if m.measure {
		m.runHTTP(c.ctx, c, &res, false)
	} else {
		m.runHTTP(c.ctx, c, m.timedResult(&res), false)
	}
	m.requests.ran(httpTimedOut(&res))
	return nil
}

// runHTTP runs a net/http handler with ctx, timed when a timeout or a
// custom pipeline (whose timeout strategy may end ctx) can end it. A
// non-nil res receives how the request ended.
func (m *Middleware) runHTTP(ctx context.Context, c *call, res *result, custom bool) {
	if m.timeout > 0 || custom {
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
