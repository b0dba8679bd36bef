package resiliencegrpc

import (
	"net/http"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Inbound returns the underlying inbound middleware: its Limiter to change
// the limit at run time, its RateLimiter and AdaptiveLimiter, and Drain.
func (m *Middleware) Inbound() *inbound.Middleware { return m.in.Middleware }

// Stats returns the middleware's current load: Inbound().Stats(), whose
// Late and LateTotal count the handlers still running after their
// deadline was answered.
func (m *Middleware) Stats() inbound.Stats { return m.in.Stats() }

// StatsHandler serves Stats as JSON, as every adapter's StatsHandler does,
// for a debug route on an HTTP server beside the gRPC one (a gRPC server
// has no routes of its own):
//
//	debug := http.NewServeMux()
//	debug.Handle("/debug/limits", mw.StatsHandler())
func (m *Middleware) StatsHandler() http.Handler { return m.in.StatsHandler() }
