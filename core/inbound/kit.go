package inbound

import (
	"net/http"

	"github.com/ylcnfrht/resilience/core/inbound/internal/kit"
)

// init hands the adapter kit's entry points to package adapt.
func init() {
	kit.SetDraining(func(m *Middleware) bool { return m.draining.Load() })
	kit.Set(&kit.Hooks[Middleware, Options, Request, Response]{
		New:                newFor,
		Serve:              (*Middleware).serve,
		ServeAnswering:     (*Middleware).serveAnswering,
		Execute:            (*Middleware).execute,
		ExecuteInPlace:     (*Middleware).executeInPlace,
		Render:             (*Middleware).render,
		Restyle:            (*Middleware).restyle,
		RenderServe:        (*Middleware).renderServe,
		CapacityRetryAfter: (*Middleware).capacityRetryAfter,
		Timed:              (*Middleware).timed,
		ClosesConnection:   (*Middleware).closesConnection,
		RateLimitFields:    func(m *Middleware) bool { return m.rate != nil && m.opts.RateLimitHeaders != RateLimitHeadersOff },
		Answered:           wasAnswered,
		WriteResponse:      writeResponse,
		DetachHTTP2:        detachHTTP2,
		Detached:           func(w http.ResponseWriter) bool { return findDetached(w) != nil },
		NewContext:         newContext,
	})
}
