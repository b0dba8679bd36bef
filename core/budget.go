package resilience

import (
	"sync"
	"sync/atomic"
	"time"
)

// RetryBudgetOptions configures a RetryBudget. The zero value is the
// defaults: a tenth of the first attempts of the last 10 s may be retried
// or hedged, plus one retry per second.
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
type RetryBudgetOptions struct {
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

// Defaults of RetryBudgetOptions.
const (
	DefaultRetryBudgetRatio        = 0.1
	DefaultRetryBudgetMinPerSecond = 1.0
	DefaultRetryBudgetWindow       = 10 * time.Second
)

// RetryBudget caps retries and hedged attempts across calls: it allows
// them as a share of the first attempts made over a sliding window plus a
// small floor per second, so that when a dependency fails every call
// cannot multiply its load by the attempt count at once. Share one budget
// between every Retry and Hedging that calls the same dependency
// (RetryOptions.Budget, HedgingOptions.Budget, outbound.Options.Budget).
// A retry the budget denies ends the call with the last outcome, as if
// the retries had run out.
//
// The guarantee, at every retry it allows at time t: the retries allowed
// in [t−Window, t] are at most Ratio × the first attempts recorded in
// [t−Window, t] plus MinPerSecond × Window. It keeps ten slots per
// window; to keep the bound exact it counts first attempts over the
// last nine and a part slots only, so it allows slightly fewer than the
// ratio (at most a tenth fewer).
//
// Safe for concurrent use; its methods do not allocate. The zero value is
// not usable: create it with NewRetryBudget (a nil *RetryBudget in
// options means no budget).
type RetryBudget struct {
	ratio float64
	floor float64 // retries allowed per window whatever the ratio
	w     slotWindow
	// allowed and denied count every decision since creation.
	allowed, denied atomic.Uint64
}

// NewRetryBudget returns a budget, or a *ConfigError naming the first
// invalid option.
func NewRetryBudget(opts RetryBudgetOptions) (*RetryBudget, error) {
	if opts.Ratio < 0 {
		return nil, configErrorf("RetryBudgetOptions.Ratio", "must not be negative, got %v", opts.Ratio)
	}
	if err := checkNonNegativeDuration("RetryBudgetOptions.Window", opts.Window); err != nil {
		return nil, err
	}
	ratio, perSec, window := opts.Ratio, opts.MinPerSecond, opts.Window
	if ratio == 0 {
		ratio = DefaultRetryBudgetRatio
	}
	switch {
	case perSec == 0:
		perSec = DefaultRetryBudgetMinPerSecond
	case perSec < 0:
		perSec = 0
	}
	if window == 0 {
		window = DefaultRetryBudgetWindow
	}
	if window < windowSlots*time.Millisecond {
		return nil, configErrorf("RetryBudgetOptions.Window", "must be at least %v, got %v", windowSlots*time.Millisecond, window)
	}
	b := &RetryBudget{ratio: ratio, floor: perSec * window.Seconds()}
	b.w.init(window)
	return b, nil
}

// FirstAttempt records a first attempt, which pays for Ratio retries over
// the window. Retry and Hedging call it once per execution; call it
// yourself only for calls made outside them that should fund retries.
func (b *RetryBudget) FirstAttempt() {
	b.w.mu.Lock()
	s := b.w.advance()
	s.a++
	b.w.mu.Unlock()
}

// AllowRetry reports whether one more retry or hedged attempt is within
// the budget, and if so counts it. Retry and Hedging call it before each
// retry and hedge.
func (b *RetryBudget) AllowRetry() bool {
	b.w.mu.Lock()
	s := b.w.advance()
	firsts, retries := b.w.sums()
	ok := float64(retries+1) <= b.ratio*float64(firsts)+b.floor
	if ok {
		s.b++
	}
	b.w.mu.Unlock()
	if ok {
		b.allowed.Add(1)
	} else {
		b.denied.Add(1)
	}
	return ok
}

// RetryBudgetStats is a snapshot of a RetryBudget.
type RetryBudgetStats struct {
	// FirstAttempts and Retries are what the current window holds.
	FirstAttempts int64
	Retries       int64
	// Available is how many retries it would allow now.
	Available int64
	// Allowed and Denied count every decision since the budget was made.
	Allowed, Denied uint64
}

// Stats returns the budget's current state, for metrics and tests.
func (b *RetryBudget) Stats() RetryBudgetStats {
	b.w.mu.Lock()
	b.w.advance()
	firsts, retries := b.w.sums()
	b.w.mu.Unlock()
	avail := int64(b.ratio*float64(firsts)+b.floor) - retries
	return RetryBudgetStats{FirstAttempts: firsts, Retries: retries, Available: max(avail, 0),
		Allowed: b.allowed.Load(), Denied: b.denied.Load()}
}

// windowSlots is the number of slots a window is cut into.
const windowSlots = 10

// slotWindow counts two kinds of events (a and b) over a sliding window
// cut into windowSlots slots, keeping one slot more than the window so
// that b can be counted over a span that covers the whole window and a
// over one inside it (see RetryBudget). A mutex guards it: the critical
// section is a few additions, cheaper than making the slot reset and the
// counts agree without one.
type slotWindow struct {
	slot  time.Duration
	start time.Time // slot numbers count from here (monotonic)
	mu    sync.Mutex
	cur   int64 // slot number of the newest slot
	slots [windowSlots + 1]slotCounts
}

type slotCounts struct{ a, b, c int64 }

func (w *slotWindow) init(window time.Duration) {
	w.slot = window / windowSlots
	w.start = time.Now()
}

// advance moves the window to now and returns the current slot. w.mu must
// be held.
func (w *slotWindow) advance() *slotCounts {
	n := int64(time.Since(w.start) / w.slot)
	if n > w.cur {
		// Clear the slots skipped since the last call, at most all of
		// them.
		for i := w.cur + 1; i <= n && i <= w.cur+int64(len(w.slots)); i++ {
			w.slots[i%int64(len(w.slots))] = slotCounts{}
		}
		w.cur = n
	}
	return &w.slots[w.cur%int64(len(w.slots))]
}

// sums returns a over the current and the windowSlots-1 slots before it
// (a span a little shorter than the window, inside it) and b over every
// slot (a span at least the window). w.mu must be held.
func (w *slotWindow) sums() (a, b int64) {
	// The oldest slot, windowSlots before the current one, shares the
	// ring index after it.
	oldest := (w.cur + 1) % int64(len(w.slots))
	for i := range w.slots {
		s := &w.slots[i]
		b += s.b
		if int64(i) != oldest {
			a += s.a
		}
	}
	return a, b
}

// sums3 returns a, b and c over the current and the windowSlots-1 slots
// before it. w.mu must be held.
func (w *slotWindow) sums3() (a, b, c int64) {
	oldest := (w.cur + 1) % int64(len(w.slots))
	for i := range w.slots {
		if int64(i) != oldest {
			s := &w.slots[i]
			a, b, c = a+s.a, b+s.b, c+s.c
		}
	}
	return a, b, c
}
