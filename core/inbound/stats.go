package inbound

import (
	"encoding/json"
	"net/http"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Stats is a snapshot of a middleware's load, for a debug endpoint or a
// metrics exporter; the JSON names are stable.
type Stats struct {
	// LimiterStats is the concurrency limiter's Limit, InFlight and
	// Queued, and with a Flow function its Flows and LargestFlowShare;
	// zero without one. InFlight counts late handlers too: they
	// still hold their permits. It counts permits, not requests: under
	// a Cost function a request holds its cost.
	resilience.LimiterStats
	// Late is the number of handlers still running after their deadline
	// was answered (504 or abort): work the client no longer waits for.
	Late int64 `json:"late"`
	// LateTotal counts every handler that ever ran past its deadline.
	LateTotal uint64 `json:"lateTotal"`
	// Costly is the number of requests running now that hold more than
	// one permit, under a Cost function (Options.Concurrency): beside
	// InFlight, which counts their permits, it tells one export from ten
	// reads. Left out of the JSON while zero.
	Costly int64 `json:"costly,omitempty"`
	// RequestCounts counts every request by how it ended; its fields
	// add up to Requests.
	RequestCounts
	// Requests is the number of requests seen: the sum of RequestCounts'
	// fields, so any of them divided by it is a share.
	Requests uint64 `json:"requests"`
	// Shadow counts the decisions made in shadow (Options.Shadow) and
	// not enforced; zero, and left out of the JSON, when nothing ran in
	// shadow.
	Shadow ShadowCounts `json:"shadow,omitzero"`
	// Config is the configuration in force: New's, or the last
	// Reconfigure's that succeeded. It is left out of StatsHandler's
	// JSON, which stays the load and the counts; a debug endpoint that
	// wants it serves json.Marshal(Config) beside them, as examples/server
	// does under "config".
	Config Settings `json:"-"`
	// Reconfigured counts the calls of Reconfigure that were applied,
	// ReconfigureRefused those refused (nothing changed); each is left
	// out of the JSON while zero.
	Reconfigured       uint64 `json:"reconfigured,omitempty"`
	ReconfigureRefused uint64 `json:"reconfigureRefused,omitempty"`
}

// Stats returns the current numbers. Safe for concurrent use; the fields
// are read one after the other, not as one atomic snapshot.
func (m *Middleware) Stats() Stats {
	var s Stats
	switch {
	case m.gate != nil:
		s.LimiterStats = m.gate.stats()
	case m.pipeline != nil && m.opts.LimiterStats != nil:
		s.LimiterStats = m.opts.LimiterStats()
	}
	s.Late = m.late.Load()
	s.LateTotal = m.lateTotal.Load()
	s.Costly = m.costly.Load()
	s.Shadow = m.shadow.load()
	s.RequestCounts = m.requests.load()
	s.Requests = s.RequestCounts.sum()
	s.Config = m.settings()
	s.Reconfigured, s.ReconfigureRefused = m.reconf.applied.Load(), m.reconf.refused.Load()
	return s
}

// StatsHandler serves Stats as JSON (the examples mount it at
// /debug/limits), without Stats.Config. It is not rate limited or timed
// itself.
func (m *Middleware) StatsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b, _ := json.Marshal(m.Stats()) // plain ints: cannot fail
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(append(b, '\n')) //nolint:errcheck
	})
}

// lateBegins counts a handler whose deadline was answered while it runs
// on; lateEnds, when it returns. Every entry point counts through these
// two, before the answer goes out, so whoever sees the 504 sees the late
// handler in Stats.
func (m *Middleware) lateBegins() {
	m.late.Add(1)
	m.lateTotal.Add(1)
}

func (m *Middleware) lateEnds() { m.late.Add(-1) }
