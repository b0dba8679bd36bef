package limit

// baseline is the no-load round-trip time the delay-based algorithms
// compare with, protected against drift. It starts at the first window's
// mean (a limiter's first window closes after ten samples, executions
// admitted before any load built up) and falls with every faster window,
// but it rises only when the limit cannot be what made latency rise: when
// the service is app-limited (in flight below half the limit) and the
// window is within the tolerance, or the limit already sits at MinLimit.
// Otherwise a long incident would teach it that overloaded latency is
// normal: the limit settles a little above the knee, where latency is a
// little above the baseline, and a baseline that followed would move the
// knee up every time, until the limit reached MaxLimit. A service that
// became slower for good (a slow dependency) still gets its new baseline:
// its limit falls to MinLimit, and from there the baseline follows.
type baseline struct {
	rtt       float64 // nanoseconds; 0 until the first sample
	up, down  float64 // smoothing factors for rising and falling
	tolerance float64 // app-limited windows within it may raise it
}

func (b *baseline) observe(s Sample, rtt float64) {
	switch {
	case b.rtt == 0:
		b.rtt = rtt
	case rtt < b.rtt:
		b.rtt += (rtt - b.rtt) * b.down
	case s.Limit <= float64(s.MinLimit) || (float64(s.InFlight)*2 < s.Limit && rtt <= b.rtt*b.tolerance):
		b.rtt += (rtt - b.rtt) * b.up
	}
}
