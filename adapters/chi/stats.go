package resiliencechi

import "net/http"

// StatsHandler serves Stats as JSON, for a debug route outside the
// middleware (the examples mount it at /debug/limits), as every adapter's
// StatsHandler does.
func (m *Middleware) StatsHandler() http.Handler { return m.in.StatsHandler() }
