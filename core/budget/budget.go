// Package budget caps the retries and hedged attempts that calls to one
// dependency may add, as a share of their first attempts. Most callers
// want New and the *Budget it returns, set as resilience.RetryOptions.Budget,
// resilience.HedgingOptions.Budget or outbound.Options.Budget.
package budget

import (
	"sync/atomic"
	"time"

	"github.com/ylcnfrht/resilience/core/internal/config"
	"github.com/ylcnfrht/resilience/core/internal/window"
)

// Options configures a Budget. The zero value is the defaults: a tenth of
// the first attempts of the last 10 s may be retried or hedged, plus one
// retry per second.
//
// Why these defaults: Finagle's RetryBudget allows 20 % plus 10 retries a
// second over 10 s, gRPC's retry throttling is usually configured with a
// token ratio of 0.1, and the AWS SDKs' retry quota (500 tokens, 5 per
// retry, 1 back per success) settles near a retry for every five
// successes once it is drawn down. A ratio of 0.1 bounds the load a
// fleet of clients adds to an overloaded service to 10 %, which it can
// usually absorb; 0.2 is already a fifth more work at the worst moment.
// The floor is per budget, and a budget is usually per client process:
// Finagle's 10 a second, multiplied over a fleet of a hundred instances,
// is a thousand retries a second that no ratio bounds, so ours is 1.
type Options struct {
	// Ratio is how many retries (and hedged attempts) each first attempt
	// of the Window pays for: 0.1 lets one call in ten try again once.
	// 0 means 0.1.
	Ratio float64
	// MinPerSecond is how many retries a second are allowed on top of
	// the ratio, so that a client with little traffic can still retry
	// its rare failures. 0 means 1; a negative value means none.
	MinPerSecond float64
	// Window is how long a first attempt pays for retries. 0 means 10 s.
	Window time.Duration
}

// Defaults of Options.
const (
	DefaultRatio        = 0.1
	DefaultMinPerSecond = 1.0
	DefaultWindow       = 10 * time.Second
)

// Budget caps retries and hedged attempts across calls: it allows them as
// a share of the first attempts made over a sliding window plus a small
// floor per second, so that when a dependency fails every call cannot
// multiply its load by the attempt count at once. Share one budget
// between every Retry and Hedging that calls the same dependency. A retry
// the budget denies ends the call with the last outcome, as if the
// retries had run out.
//
// The guarantee, at every retry it allows at time t: the retries allowed
// in [t−Window, t] are at most Ratio × the first attempts recorded in
// [t−Window, t] plus MinPerSecond × Window. It keeps ten slots per
// window; to keep the bound exact it counts first attempts over the
// last nine and a part slots only, so it allows slightly fewer than the
// ratio (at most a tenth fewer).
//
// Safe for concurrent use; its methods do not allocate. The zero value is
// not usable: create it with New (a nil *Budget in options means no
// budget).
type Budget struct {
	ratio float64
	floor float64       // retries allowed per window whatever the ratio
	w     window.Window // A: first attempts, B: retries allowed
	// allowed and denied count every decision since creation.
	allowed, denied atomic.Uint64
}

// New returns a budget, or a *resilience.ConfigError naming the first
// invalid option.
func New(opts Options) (*Budget, error) {
	if opts.Ratio < 0 {
		return nil, config.Errorf("budget.Options.Ratio", "must not be negative, got %v", opts.Ratio)
	}
	if err := config.NonNegativeDuration("budget.Options.Window", opts.Window); err != nil {
		return nil, err
	}
	ratio, perSec, win := opts.Ratio, opts.MinPerSecond, opts.Window
	if ratio == 0 {
		ratio = DefaultRatio
	}
	switch {
	case perSec == 0:
		perSec = DefaultMinPerSecond
	case perSec < 0:
		perSec = 0
	}
	if win == 0 {
		win = DefaultWindow
	}
	if win < window.MinWindow {
		return nil, config.Errorf("budget.Options.Window", "must be at least %v, got %v", window.MinWindow, win)
	}
	b := &Budget{ratio: ratio, floor: perSec * win.Seconds()}
	b.w.Init(win)
	return b, nil
}

// FirstAttempt records a first attempt, which pays for Ratio retries over
// the window. Retry and Hedging call it once per execution; call it
// yourself only for calls made outside them that should fund retries.
func (b *Budget) FirstAttempt() {
	b.w.Mu.Lock()
	s := b.w.Advance()
	s.A++
	b.w.Mu.Unlock()
}

// AllowRetry reports whether one more retry or hedged attempt is within
// the budget, and if so counts it. Retry and Hedging call it before each
// retry and hedge.
func (b *Budget) AllowRetry() bool {
	b.w.Mu.Lock()
	s := b.w.Advance()
	firsts, retries := b.w.Sums()
	ok := float64(retries+1) <= b.ratio*float64(firsts)+b.floor
	if ok {
		s.B++
	}
	b.w.Mu.Unlock()
	if ok {
		b.allowed.Add(1)
	} else {
		b.denied.Add(1)
	}
	return ok
}

// Stats is a snapshot of a Budget.
type Stats struct {
	// FirstAttempts and Retries are what the current window holds.
	FirstAttempts int64
	Retries       int64
	// Available is how many retries it would allow now.
	Available int64
	// Allowed and Denied count every decision since the budget was made.
	Allowed, Denied uint64
}

// Stats returns the budget's current state, for metrics and tests.
func (b *Budget) Stats() Stats {
	b.w.Mu.Lock()
	b.w.Advance()
	firsts, retries := b.w.Sums()
	b.w.Mu.Unlock()
	avail := int64(b.ratio*float64(firsts)+b.floor) - retries
	return Stats{FirstAttempts: firsts, Retries: retries, Available: max(avail, 0),
		Allowed: b.allowed.Load(), Denied: b.denied.Load()}
}
