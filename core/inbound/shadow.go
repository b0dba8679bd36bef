package inbound

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// Shadow runs stages in shadow, for learning a limit on live traffic
// before enforcing it: each field is the share of requests, in percent
// (0 to 100), whose decision that stage makes and counts (Stats.Shadow,
// the event.ShadowDecision event) without enforcing it; the request goes
// on as if admitted. The zero value enforces every decision; 100 enforces
// none (a dry run); 50 enforces half of them, drawn per request, for a
// ramp. Set it in the Options given to New; change it while serving with
// Reconfigure, from Middleware.Options (o.Shadow.Concurrency = 50).
// docs/guide.md ("Rolling out") shows the sequence.
//
// In shadow, the rate limit takes its token as when enforcing (its state
// and headers are the same) and counts a refusal it did not send; the
// concurrency limiter lets a request that finds no free permit run
// without one (the limiter's InFlight counts only permit holders; the
// rest are Stats.Shadow.Over) and counts it as one it would have queued,
// or refused as full once more run without a permit than its queue holds
// (so a queue's wait, priority and fairness are not rehearsed, only its
// size); the timeout leaves the handler's context alone, writes no 504,
// and counts the request when its deadline passes. The adaptive limiter
// keeps learning from the requests holding its permits.
type Shadow struct {
	RateLimit   int
	Concurrency int
	Timeout     int
}

// ShadowCounts counts the decisions stages made in shadow and did not
// enforce, by what enforcing would have answered. They are apart from
// RequestCounts, whose fields still add up to every request.
type ShadowCounts struct {
	// RateLimited counts requests the rate limit would have refused (429,
	// or a store that failed closed).
	RateLimited uint64 `json:"rateLimited"`
	// Queued counts requests that found no free permit and would have
	// waited in the queue; Full, those it would have refused, the queue
	// being full (with no queue, every request over the limit).
	Queued uint64 `json:"queued"`
	Full   uint64 `json:"full"`
	// TimedOut counts requests whose deadline passed while their handler
	// ran on: they would have been answered 504.
	TimedOut uint64 `json:"timedOut"`
	// Over is the number of requests running now without a permit, in
	// shadow: the concurrency the limit would have cut.
	Over int64 `json:"over"`
}

// shadowState is the middleware's shadow shares, changeable while it
// serves, and its counts.
type shadowState struct {
	rate, conc, timeout atomic.Int32
	rateLimited         atomic.Uint64
	queued, full        atomic.Uint64
	timedOut            atomic.Uint64
	over                atomic.Int64
	tel                 resilience.Telemetry
}

func (s *shadowState) set(sh Shadow) {
	s.rate.Store(int32(sh.RateLimit))
	s.conc.Store(int32(sh.Concurrency))
	s.timeout.Store(int32(sh.Timeout))
}

func (s *shadowState) load() ShadowCounts {
	return ShadowCounts{
		RateLimited: s.rateLimited.Load(), Queued: s.queued.Load(), Full: s.full.Load(),
		TimedOut: s.timedOut.Load(), Over: s.over.Load(),
	}
}

// shadowed draws whether this request's decision of the stage whose share
// is p goes unenforced: one atomic load when the stage enforces all.
func shadowed(p *atomic.Int32) bool {
	switch v := p.Load(); {
	case v <= 0:
		return false
	case v >= 100:
		return true
	default:
		return rand.Int32N(100) < v
	}
}

// validate checks each share.
func (sh Shadow) validate(o *Options) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"Options.Shadow.RateLimit", sh.RateLimit}, {"Options.Shadow.Concurrency", sh.Concurrency}, {"Options.Shadow.Timeout", sh.Timeout}} {
		if f.v < 0 || f.v > 100 {
			return configError(f.name, "must be a share in percent, 0 (enforce every decision) to 100 (enforce none), got %d", f.v)
		}
	}
	if sh.Concurrency > 0 && o.Pipeline != nil {
		return configError("Options.Shadow.Concurrency", "applies to Options.Concurrency or Options.Adaptive, not to a custom Options.Pipeline")
	}
	return nil
}

// emitShadow reports a decision made in shadow, under its would-be cause.
func (m *Middleware) emitShadow(ctx context.Context, reason string, d time.Duration) {
	m.shadow.tel.Emit(ctx, event.Event{Name: event.ShadowDecision, Reason: reason, Duration: d})
}

// shadowRate counts a rate-limit refusal that was not enforced.
func (m *Middleware) shadowRate(ctx context.Context) {
	m.shadow.rateLimited.Add(1)
	m.emitShadow(ctx, event.ReasonRateLimited, 0)
}

// runOver runs c's handler without a permit, in shadow: the concurrency
// limiter found none free and would have queued or refused it.
func (m *Middleware) runOver(c *call) error {
	n := m.shadow.over.Add(1)
	defer m.shadow.over.Add(-1)
	reason := resilience.ReasonFull
	if n <= m.queueLimit.Load() {
		reason = "queued"
		m.shadow.queued.Add(1)
	} else {
		m.shadow.full.Add(1)
	}
	m.emitShadow(c.ctx, string(reason), 0)
	return m.runHeld(c.ctx, c, nil, permit{})
}

// shadowTimer counts a request whose deadline passes while it runs on, in
// shadow; stop ends it at the handler's return.
type shadowTimer struct {
	t *time.Timer
}

// startShadowTimer arms the count at the middleware's timeout from now
// (or from arrival when the budget counts from it).
func (m *Middleware) startShadowTimer(ctx context.Context, arrival time.Time, tc *timeoutConf) shadowTimer {
	budget := tc.d
	if !arrival.IsZero() {
		budget = time.Until(arrival)
	}
	return shadowTimer{t: time.AfterFunc(budget, func() {
		m.shadow.timedOut.Add(1)
		m.emitShadow(ctx, "timeout", tc.d)
	})}
}

func (s shadowTimer) stop() {
	if s.t != nil {
		s.t.Stop()
	}
}
