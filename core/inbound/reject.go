package inbound

import (
	"context"
	"github.com/ylcnfrht/resilience/core/inbound/internal/kit"
	"github.com/ylcnfrht/resilience/core/retryafter"
	"net/http"
	"strconv"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// Response is a rendered rejection: what to send instead of running the
// handler. Adapters copy it into their framework's response. Header and
// Body may be shared between responses and goroutines: treat them as
// read-only (clone before changing). The zero value means nothing to send.
// A Render hook's Response whose Status is outside 100–999 is replaced by
// the default, so a faulty hook cannot break the reply.
type Response struct {
	// Status is the HTTP status code (429, 503, 504, …).
	Status int
	// Header holds the fields to set, including Content-Type.
	Header http.Header
	// Body is the complete body. It never contains internal error text.
	Body []byte
}

// Stable machine-readable codes in rejection bodies.
const (
	CodeBulkheadFull = "BULKHEAD_FULL"
	CodeTimeout      = "TIMEOUT"
	CodeRateLimited  = "RATE_LIMITED"
	// CodeRejected is for a rejection by another strategy of a custom
	// pipeline (a circuit breaker, say).
	CodeRejected = "REJECTED"
	// CodeInternal is for an error from a custom pipeline that is not a
	// rejection: it is reported without its text.
	CodeInternal = "INTERNAL"
)

// The bodies are constant per outcome, so they are rendered once here and
// a rejection costs no marshalling. Hand-written JSON: every string is a
// constant without characters that need escaping.
func jsonBody(status int, code, message, reason string) []byte {
	b := []byte(`{"statusCode":` + strconv.Itoa(status) +
		`,"error":"` + http.StatusText(status) +
		`","message":"` + message +
		`","code":"` + code + `"`)
	if reason != "" {
		b = append(b, `,"reason":"`+reason+`"`...)
	}
	return append(b, '}')
}

var (
	jsonHeader = http.Header{"Content-Type": {"application/json"}}

	respFull         = staticResponse(503, CodeBulkheadFull, kit.MessageCapacity, resilience.ReasonFull)
	respQueueTimeout = staticResponse(503, CodeBulkheadFull, kit.MessageCapacity, resilience.ReasonQueueTimeout)
	respDropped      = staticResponse(503, CodeBulkheadFull, kit.MessageCapacity, resilience.ReasonDropped)
	respShuttingDown = staticResponse(503, CodeBulkheadFull, kit.MessageShuttingDown, resilience.ReasonShuttingDown)
	respTimeout      = staticResponse(504, CodeTimeout, kit.MessageTimeout, "")
	respRejected     = staticResponse(503, CodeRejected, kit.MessageRejected, "")
	respInternal     = staticResponse(500, CodeInternal, kit.MessageInternal, "")
	bodyRateLimited  = jsonBody(429, CodeRateLimited, kit.MessageRateLimited, "")

	// timeoutContentLengthValue is the default 504's Content-Length
	// field, for the complete response the middleware writes at the
	// deadline. Shared: never modified.
	timeoutContentLengthValue = []string{strconv.Itoa(len(respTimeout.Body))}
)

func staticResponse(status int, code, msg string, reason resilience.RejectReason) Response {
	return Response{Status: status, Header: jsonHeader, Body: jsonBody(status, code, msg, string(reason))}
}

// renderDefault maps an error from the inbound pipeline to a response. ok
// is false when nothing must be sent: the client went away.
func (m *Middleware) renderDefault(err error) (Response, bool) {
	switch r, rate := kit.Refuse(err); r {
	case kit.None:
		return Response{}, false
	case kit.RateLimited:
		h := make(http.Header, 6)
		h["Content-Type"] = jsonHeader["Content-Type"]
		h["Retry-After"] = []string{retryafter.Format(rate.RetryAfter)}
		m.setRateLimitFields(h, rate.Limit, rate.Remaining, rate.Reset)
		return Response{Status: http.StatusTooManyRequests, Header: h, Body: bodyRateLimited}, true
	case kit.Full:
		return m.capacity.full, true
	case kit.QueueTimeout:
		return m.capacity.queueTimeout, true
	case kit.Dropped:
		return m.capacity.dropped, true
	case kit.ShuttingDown:
		return m.capacity.shuttingDown, true
	case kit.Timeout, kit.CallerDeadline:
		// Ours, or a caller's deadline carried by the request's context
		// (a budget from upstream): either way time ran out.
		return respTimeout, true
	case kit.Rejected:
		// Another strategy's rejection, or a rate-limit store that failed
		// closed: the service declines for now.
		return m.capacity.rejected, true
	}
	return respInternal, true
}

// render is adapt.Kit.Render, documented there: the default response
// for err, through Options.Render when set (a hook's bad status or panic
// gives the default), "Connection: close" once draining; false when
// nothing must be sent (the client left).
func (m *Middleware) render(err error) (resp Response, ok bool) {
	resp, ok = m.renderDefault(err)
	if ok && !m.fw.RenderOwn {
		resp = m.restyle(err, resp)
	}
	if ok {
		resp = m.closeWhenDraining(err, resp) // see drainclose.go
	}
	return resp, ok
}

// restyle applies Options.Render to def, the default answer to err
// (adapt.Kit.Restyle, for an adapter answering in a format of its own).
// A hook's mistake must not panic every rejected request (net/http panics
// on an invalid status): a status outside 100–999 gives def.
func (m *Middleware) restyle(err error, def Response) Response {
	if m.opts.Render == nil {
		return def
	}
	if r, ok := m.renderHook(err, def); ok && r.Status >= 100 && r.Status <= 999 {
		return r
	}
	return def
}

// renderHook calls Options.Render. A panic in it is contained: the 504 at
// the deadline is rendered on a timer's goroutine, where it would bring
// down the process, so every call site gets the same rule (the default
// response, and event.HookPanic).
func (m *Middleware) renderHook(err error, def Response) (r Response, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			ok = false
			m.hookTel.EmitHookPanic(context.Background(), event.HookRender, v)
		}
	}()
	return m.opts.Render(err, def), true
}

// ceilSeconds rounds d up to whole seconds, and to at least min.
func ceilSeconds(d time.Duration, min int64) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	if s < min {
		s = min
	}
	return s
}

// writeResponse is adapt.WriteResponse: resp on w, with its
// Content-Length, as Handler sends a rejection.
func writeResponse(w http.ResponseWriter, resp Response) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	h["Content-Length"] = []string{strconv.Itoa(len(resp.Body))}
	w.WriteHeader(resp.Status)
	w.Write(resp.Body) //nolint:errcheck // the client may be gone; nothing to do
}

// errShuttingDown is what a draining middleware answers every arrival
// with: 503 BULKHEAD_FULL, reason "shutting-down".
var errShuttingDown = &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonShuttingDown}

// rejectHTTP answers a request that did not reach its handler. When its
// context ended while it waited, nothing was rendered: if the client is
// gone the connection is aborted (net/http would otherwise send an empty
// 200 of its own); if the server ended the context (a BaseContext
// cancelled at shutdown) the client, still there, gets the honest 503
// shutting-down. Everything the request held is returned by then.
func (m *Middleware) rejectHTTP(w http.ResponseWriter, r *http.Request, err error) {
	resp, ok := m.render(err)
	if !ok {
		if clientGone(w) {
			panic(http.ErrAbortHandler)
		}
		resp, _ = m.render(errShuttingDown)
	}
	writeResponse(w, resp)
}

// closeWait bounds how long clientGone waits for net/http's close
// notification: net/http cancels the request's context first and
// notifies a moment later (for HTTP/2 from a goroutine of its own), so a
// waiter woken by the cancellation may look before the notice is there.
const closeWait = 20 * time.Millisecond

// clientGone reports whether net/http saw the client leave (its
// connection, or its HTTP/2 stream, closed), as opposed to the request's
// context being ended by the server. It is only called once the context
// has ended, off the hot path; a server's cancellation costs it closeWait.
// A writer that cannot tell counts as gone.
func clientGone(w http.ResponseWriter) bool {
	if d, ok := w.(*detachedWriter); ok {
		w = d.w
	}
	//lint:ignore SA1019 the only way net/http tells a closed connection from a cancelled context
	cn, ok := w.(http.CloseNotifier)
	if !ok {
		return true
	}
	ch := cn.CloseNotify()
	select {
	case <-ch:
		return true
	default:
	}
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}
