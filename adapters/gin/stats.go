package resiliencegin

import (
	"net/http"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Inbound returns the underlying inbound middleware: its Limiter to
// change the limit at run time, and Drain, to call before the
// server's Shutdown (inbound.Middleware.Drain says what it does).
func (m *Middleware) Inbound() *inbound.Middleware { return m.in.Middleware }

// Stats returns the middleware's current load (see inbound.Stats).
func (m *Middleware) Stats() inbound.Stats { return m.in.Stats() }

// StatsHandler serves Stats as JSON, for a debug route outside the
// middleware (the examples mount it at /debug/limits), as every adapter's
// StatsHandler does.
func (m *Middleware) StatsHandler() http.Handler { return m.in.StatsHandler() }
