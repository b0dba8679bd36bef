// Package ready is the readiness probe of a service behind the inbound
// middleware: it fails from the moment the service should get no more
// traffic (Fail, or a middleware's Drain), so that a load balancer stops
// sending before the middleware starts refusing.
package ready

import (
	"net/http"
	"sync/atomic"

	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/internal/kit"
)

// draining reads whether a middleware started to drain.
var draining = kit.Draining[inbound.Middleware]()

// Probe is a readiness probe for a load balancer or Kubernetes: its
// handler answers 200 while the server should get traffic and 503 from
// the moment it should not, so that the balancer stops sending before the
// middleware starts refusing. Mount it outside the middleware (it must
// answer while the server is saturated), for example at /readyz.
//
// It fails once Fail is called or once any of its middlewares starts to
// Drain, whichever comes first, and never recovers. The shutdown order it
// serves (see the guide, Shutting down):
//
//	ready.Fail()                // the probe fails; requests are still served
//	time.Sleep(endpointsDelay)  // the balancer's next probes see it and stop sending
//	mw.Drain(ctx)               // the stragglers get 503 shutting-down; running handlers finish
//	srv.Shutdown(ctx)
//
// Safe for concurrent use. Build it with New; the zero value is ready
// and watches no middleware.
type Probe struct {
	failed atomic.Bool
	mws    []*inbound.Middleware
}

// New returns a probe that is ready until Fail is called or one
// of mws starts to drain.
func New(mws ...*inbound.Middleware) *Probe {
	return &Probe{mws: append([]*inbound.Middleware(nil), mws...)}
}

// Fail makes the probe fail from now on: the first step of a graceful
// shutdown. Requests are still admitted as before; call Drain once the
// balancer has had time to notice.
func (r *Probe) Fail() { r.failed.Store(true) }

// Ready reports whether the probe passes: Fail was not called and no
// middleware drains.
func (r *Probe) Ready() bool {
	if r.failed.Load() {
		return false
	}
	for _, m := range r.mws {
		if draining(m) {
			return false
		}
	}
	return true
}

var (
	readyBody    = []byte("ready\n")
	notReadyBody = []byte("shutting down\n")
)

// ServeHTTP answers the probe: 200 "ready", or 503 "shutting down" once
// the server should get no more traffic. The answer is never cached.
func (r *Probe) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	status, body := http.StatusOK, readyBody
	if !r.Ready() {
		status, body = http.StatusServiceUnavailable, notReadyBody
	}
	w.WriteHeader(status)
	if req.Method != http.MethodHead {
		w.Write(body) //nolint:errcheck // the prober reads the status
	}
}
