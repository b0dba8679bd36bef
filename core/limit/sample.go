package limit

import "time"

// Sample summarises the executions an adaptive limiter saw finish in one
// sampling window: what an Algorithm decides on.
type Sample struct {
	// Limit is the limit in force, unrounded (the algorithm's last answer,
	// clamped to [MinLimit, MaxLimit]).
	Limit float64
	// MinLimit and MaxLimit are the limiter's bounds.
	MinLimit, MaxLimit int
	// RTT is the mean round-trip time of the sampled executions (queue wait
	// excluded); 0 when the window held only drops.
	RTT time.Duration
	// MinRTT is the shortest sampled round-trip time; 0 with no samples.
	MinRTT time.Duration
	// InFlight is the most executions in flight at once during the window.
	// Well below Limit means the service was not using its limit (it was
	// app-limited), so the window says nothing about a higher one.
	InFlight int
	// Queued is the number of executions waiting in the limiter's queue
	// when the window closed: demand the limit turned away for now. 0
	// without a queue.
	Queued int
	// CPUWait is the limiter's latest reading of how long a goroutine of
	// the process waits for a CPU (Go's scheduler; read at most every
	// 10 ms), which drives its CPU gate, not the limit (see
	// resilience.AdaptiveLimiter); 0 with
	// resilience.AdaptiveLimiterOptions.IgnoreCPUWait.
	CPUWait time.Duration
	// Samples is the number of executions counted as samples, Drops the
	// number counted as drops (timeouts, overload).
	Samples int
	Drops   int
}

// Algorithm computes an adaptive limiter's limit. Update is called once
// per sampling window with its summary and returns the new limit; the
// limiter clamps it to [MinLimit, MaxLimit] and ignores NaN and infinities.
// The limiter never calls Update concurrently for one limiter and calls it
// outside its lock, so an algorithm needs no locking of its own, but an
// algorithm value holds per-limiter state and must not be shared by two
// limiters. An algorithm may implement resilience.Validator;
// resilience.NewAdaptiveLimiter then checks it. A nil
// resilience.AdaptiveLimiterOptions.Algorithm means a new Gradient2. Update has no
// error result; if it panics, the limiter keeps its previous limit, hands
// the next window over as usual, and reports the panic as
// event.HookPanic (see package resilience, User hooks); the
// execution whose release closed the window goes on unharmed.
type Algorithm interface {
	Update(s Sample) float64
}
