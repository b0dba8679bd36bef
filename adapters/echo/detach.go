package resilienceecho

import (
	"maps"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/labstack/echo/v4"

	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// HTTP/2 ends a response's stream only when the server's ServeHTTP
// returns, and echo's returns only when its chain does, then puts the
// context back in its pool (Reset clears it for the next request). So
// that a 504 at the deadline ends its stream while a late handler runs on,
// a timed HTTP/2 request on echo's own context runs the pipeline and the
// rest of the chain on a worker (adapt.DetachHTTP2), for cp, a copy of c
// that the late handler may keep once echo has recycled c. The middleware
// waits for the first of the chain's return and the 504:
//
//   - the chain returned: cp's state is copied back into c, and the
//     middleware returns as if the chain had run on c (a rejection is
//     answered on c, next's error returned for echo's HTTPErrorHandler);
//   - the 504 went out (through the detached writer, onto echo's writer):
//     c's Response reads committed with status 504, the middleware
//     returns nil, and the worker never touches c nor echo's writer again.
//
// What the copy shares with c, field by field of echo's context (checked
// against its Reset, which echo runs on c for its next request):
//
//   - set anew by Reset, never written in place, so shared: request, query
//     (parsed once, then only read), echo, handler, path, pnames (the
//     route's names, owned by echo's router), logger;
//   - reused in place, so copied: pvalues (Reset blanks it in place: the
//     copy gets a slice of its own, of the same length), store (Reset drops
//     it, but a late Set must not race an outer middleware's Get on the
//     same map: cloned), lock (the store's: a fresh one), response (echo
//     resets the same *Response: the copy gets a Response of its own, with
//     the Before and After hooks earlier middlewares registered, writing
//     through the detached writer).
//
// Those hooks are closures of earlier middlewares, which may reach c: the
// copy runs them only while the request is in time, and the middleware
// waits for one running at the deadline before it gives c back to echo.
// While the worker runs, c's Response is the copy's, so that such a hook
// reads what the chain has written.

// detachable reports that echo's context and Response have the private
// fields the copy sets (checked once against the echo in use). If an echo
// release renamed them, timed HTTP/2 requests run as on a custom context:
// the 504 whole, then a stream reset, logged once.
var detachable bool

// contextType is the dynamic type of echo's own echo.Context.
var contextType reflect.Type

// The indexes of the private fields set through their addresses: the
// context's store, lock and pvalues, and the Response's hooks.
var fieldStore, fieldLock, fieldPvalues, fieldBefore, fieldAfter int

func init() {
	t := reflect.TypeOf(echo.New().NewContext(nil, nil))
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return
	}
	fields := []struct {
		t    reflect.Type
		name string
		want reflect.Type
		i    *int
	}{
		{t.Elem(), "store", reflect.TypeFor[echo.Map](), &fieldStore},
		{t.Elem(), "lock", reflect.TypeFor[sync.RWMutex](), &fieldLock},
		{t.Elem(), "pvalues", reflect.TypeFor[[]string](), &fieldPvalues},
		{t.Elem(), "response", reflect.TypeFor[*echo.Response](), new(int)},
		{reflect.TypeFor[echo.Response](), "beforeFuncs", reflect.TypeFor[[]func()](), &fieldBefore},
		{reflect.TypeFor[echo.Response](), "afterFuncs", reflect.TypeFor[[]func()](), &fieldAfter},
	}
	for _, f := range fields {
		sf, found := f.t.FieldByName(f.name)
		if !found || len(sf.Index) != 1 || sf.Type != f.want {
			return
		}
		*f.i = sf.Index[0]
	}
	// Every other field of the context must be one the notes above share.
	shared := map[string]bool{"store": true, "lock": true, "pvalues": true, "response": true,
		"request": true, "query": true, "echo": true, "handler": true, "path": true, "pnames": true, "logger": true}
	for i := range t.Elem().NumField() {
		if !shared[t.Elem().Field(i).Name] {
			return
		}
	}
	contextType, detachable = t, true
}

// fieldOf returns the address of the field i, of type T (checked by
// init), of the struct p points to, although echo does not export it.
func fieldOf[T any](p reflect.Value, i int) *T {
	return (*T)(unsafe.Pointer(p.Elem().Field(i).UnsafeAddr()))
}

// detachedRun is a timed HTTP/2 request's copy of its context and the
// work its worker runs on it.
type detachedRun struct {
	m    *Middleware
	next echo.HandlerFunc
	cp   reflect.Value // *echo's context, the copy
	res  echo.Response // cp's Response

	// The hooks of c's Response when the copy was made, which the copy's
	// run through guardBefore and guardAfter.
	before, after []func()

	// mu orders the copy's hooks and the deadline: once gone is set (the
	// 504 is out), they no longer run.
	mu   sync.Mutex
	gone bool

	// Set by the worker: the pipeline's and next's errors, and whether the
	// deadline answered, written before returned.
	err, handlerErr error
	answered        bool
	returned        atomic.Bool
}

// serveDetached is Handler for a timed HTTP/2 request on echo's own
// context: run goes on a worker for a copy of c, and Handler returns at
// the first of its return and the 504.
func (m *Middleware) serveDetached(c echo.Context, next echo.HandlerFunc) error {
	res, req := c.Response(), c.Request()
	orig := res.Writer
	x := newDetachedRun(m, c, next)
	completed := false
	defer func() {
		if !completed { // a panic before the deadline, raised here again, or a cut response
			x.settle(c, res, orig, req)
		}
	}()
	adapt.DetachHTTP2(x).ServeHTTP(orig, req)
	completed = true
	if x.settle(c, res, orig, req) {
		return nil // the 504 is the response
	}
	return m.outcome(c, orig, req, x.err, x.handlerErr, false)
}

// newDetachedRun copies c for the worker, on the request's goroutine,
// between two handlers of its chain.
func newDetachedRun(m *Middleware, c echo.Context, next echo.HandlerFunc) *detachedRun {
	x := &detachedRun{m: m, next: next}
	src := reflect.ValueOf(c)
	cp := reflect.New(contextType.Elem())
	cp.Elem().Set(src.Elem())
	*fieldOf[sync.RWMutex](cp, fieldLock) = sync.RWMutex{}
	if store := fieldOf[echo.Map](cp, fieldStore); *store != nil {
		*store = maps.Clone(*store)
	}
	pv := fieldOf[[]string](cp, fieldPvalues)
	*pv = slices.Clone(*pv)
	x.cp = cp

	x.res = *c.Response()
	p := reflect.ValueOf(&x.res)
	if b := fieldOf[[]func()](p, fieldBefore); len(*b) > 0 {
		x.before, *b = *b, []func(){x.guardBefore}
	}
	if a := fieldOf[[]func()](p, fieldAfter); len(*a) > 0 {
		x.after, *a = *a, []func(){x.guardAfter}
	}
	cc := cp.Interface().(echo.Context)
	cc.SetResponse(&x.res)
	c.SetResponse(&x.res) // for hooks that reach c; settle gives c its own back
	return x
}

func (x *detachedRun) guardBefore() { x.guard(x.before) }
func (x *detachedRun) guardAfter()  { x.guard(x.after) }

// guard runs hooks of c's Response for the copy's, unless the 504 is out.
func (x *detachedRun) guard(hooks []func()) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.gone {
		return
	}
	for _, fn := range hooks {
		fn()
	}
}

// ServeHTTP is the worker's: the pipeline and the chain for the copy,
// whose Response writes through w, the detached writer.
func (x *detachedRun) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	defer x.returned.Store(true)
	x.res.Writer = w
	x.err, x.handlerErr = x.m.run(x.cp.Interface().(echo.Context), x.next, &x.answered)
}

// settle runs on the request's goroutine once the detached ServeHTTP
// returned or panicked, and reports whether the deadline answered. If the
// chain returned in time (or panicked before the deadline), cp is copied
// back into c; otherwise the worker may run on and keeps cp, and c's
// Response reads committed, as after a 504 on HTTP/1. Either way c has
// its own Response again, writing to orig, echo's writer, and req.
func (x *detachedRun) settle(c echo.Context, res *echo.Response, orig http.ResponseWriter, req *http.Request) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.returned.Load() || x.answered {
		x.gone = true // no hook of the copy's runs from now on
		res.Writer, res.Status, res.Size, res.Committed = orig, http.StatusGatewayTimeout, x.m.timeoutSize, true
		c.SetResponse(res)
		c.SetRequest(req)
		return true
	}
	dst := reflect.ValueOf(c)
	own := *fieldOf[[]string](dst, fieldPvalues)
	dst.Elem().Set(x.cp.Elem()) // the lock is unlocked: the worker is done with cp
	if pv := fieldOf[[]string](dst, fieldPvalues); len(*pv) <= len(own) {
		copy(own, *pv)
		*pv = own // c keeps its own buffer
	}
	*res = x.res
	p := reflect.ValueOf(res)
	for _, h := range [...]struct {
		i     int
		hooks []func()
	}{{fieldBefore, x.before}, {fieldAfter, x.after}} {
		if h.hooks != nil { // the guard, first, and hooks the chain added
			f := fieldOf[[]func()](p, h.i)
			*f = append(slices.Clip(h.hooks), (*f)[1:]...)
		}
	}
	res.Writer = orig
	c.SetResponse(res)
	c.SetRequest(req)
	// Closures the chain made over cp (a Before hook, run by echo's error
	// handler) find c's state in it, c's Response included, as if the
	// chain had run on c.
	x.cp.Elem().Set(dst.Elem())
	return false
}
