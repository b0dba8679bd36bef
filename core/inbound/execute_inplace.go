package inbound

import (
	"context"

	resilience "github.com/ylcnfrht/resilience/core"
)

// ExecuteInPlace is Execute that answers at the deadline, for a framework
// not on net/http that owns the handler's goroutine: fn runs on the
// caller's goroutine, because the framework recycles its request object as soon as the adapter's handler returns
// (fiber pools its Ctx), and the 504 is sent by a layer below the
// framework that can answer for the request while fn runs on (a fasthttp
// handler wrapping the framework's, which calls
// RequestCtx.TimeoutErrorWithResponse).
//
// When the deadline (the timeout, an earlier deadline of ctx, or a
// timeout strategy of a custom pipeline) passes before fn returns,
// expired is called once, on a goroutine of its own, with the error to
// pass to Render; from then until fn returns the request counts as late
// in Stats, and it keeps its permit. ExecuteInPlace itself returns when fn
// returns, like Execute (with the *resilience.TimeoutRejectedError when
// the timeout fired). A nil expired makes it Execute.
func (m *Middleware) ExecuteInPlace(ctx context.Context, raw any, fn func(ctx context.Context) error, expired func(cause error)) error {
	if fn == nil {
		return resilience.ErrNilCallback
	}
	if expired == nil || !m.Timed() {
		return m.Execute(ctx, raw, fn)
	}
	// The deadline (runFn) moves the timed call to expired, counts it
	// late and calls expired, unless fn has returned.
	tc := &timedCall{m: m, onExpire: expired}
	defer func() {
		tc.mu.Lock()
		if tc.state == timedExpired {
			m.lateEnds() // fn ended: no longer late
		} else {
			tc.state = timedReturned
		}
		tc.mu.Unlock()
	}()
	c := call{ctx: ctx, raw: raw, fn: fn, timed: tc}
	return m.dispatch(&c)
}
